// SPDX-License-Identifier: Apache-2.0
#pragma once
// How the router merges what the members answer into one cluster-wide listing: per job
// the row that stands (by the replica rules), plus the rows it remembers of jobs that no
// answer carried (their holders are down or did not answer). Plain C++: no CAF;
// listing.test.cpp.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "runtime/membership.hpp"
#include "runtime/wire/messages/client.hpp"

namespace monkey {

/// True when row `a` stands over row `b` of the same job (a final row over one that is
/// not; else the higher version; equal versions: the lower owner id).
bool row_stands_over(const job_summary& a, const job_summary& b);

/// Keeps, per job, the row that stands.
void merge_rows(std::map<job_id, job_summary>& into, const std::vector<job_summary>& rows);

/// Remembers the rows of a cluster-wide listing in `seen`, and adds to `merged` the
/// remembered jobs that no answer carried: "unavailable (replicas down ...)" when every
/// holder is dead or gone, "last known (...)" when a holder is alive or suspect but did
/// not answer (not for filtered listings). An unfinished row that was answered, but whose
/// named holders are all dead (only a node with a stray copy answered), is marked
/// unavailable too. `seen` keeps at most `max_seen` rows (the
/// oldest submissions are forgotten first).
void remember_and_mark(std::map<job_id, job_summary>& seen, std::map<job_id, job_summary>& merged,
                       bool filtered, const std::string& self,
                       const std::function<member_state(const std::string&)>& state_of,
                       int64_t now, size_t max_seen);

/// The rows in submission order, the newest `limit` (0: all).
list_reply finish_list(const std::map<job_id, job_summary>& merged, uint32_t limit);

} // namespace monkey
