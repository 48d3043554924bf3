// SPDX-License-Identifier: Apache-2.0
#pragma once
// What a job records so that it can be run again (issue #13, docs/reproduce.md): the git
// commit of its working directory, whether it had uncommitted changes, their hash and the
// diff itself (up to 64 KiB), the Monkey version and, for a Python command, the
// interpreter's version. Collected by `monkey submit` (and `sweep start`, for every trial)
// on the submitting machine; compared by `monkey reproduce` with what is there now. Plain
// C++: no CAF (provenance.test.cpp).

#include <map>
#include <string>
#include <vector>

#include "runtime/job.hpp"

namespace monkey {

using provenance_map = std::map<std::string, std::string>;

/// The most of an uncommitted diff a job keeps (its hash covers the whole diff).
constexpr size_t max_recorded_diff = 64 * 1024;

/// What `workdir` and `command` say now: keys `monkey_version`, and when `workdir` is in a
/// git work tree `git_commit`, `git_dirty` ("yes"/"no"), `git_diff_sha256`, `git_diff`
/// (`git_diff_truncated`: "yes" when cut), and `python` for a command run by python.
provenance_map collect_provenance(const std::string& workdir,
                                  const std::vector<std::string>& command);

/// One sentence per difference that may change the result: another commit, other
/// uncommitted changes, no git tree any more, another Monkey or Python version.
std::vector<std::string> provenance_changes(const provenance_map& then,
                                            const provenance_map& now);

/// The split a run recorded (an app's `share` points: each worker's rows from the step of
/// the point on) as the schedule "STEP:R0/R1/...;STEP:..." that replays it (fmnist's
/// `shares` parameter). A retried run's timeline is its newest attempt's from that attempt's
/// first point on, the earlier attempts' before; every entry adds up to the first one's
/// total (the batch). "" when nothing is recorded, a worker's share is missing, or the run
/// kept equal shares throughout.
std::string share_schedule_of(std::vector<metric_point> points, int32_t workers);

/// SHA-256 of `data` as 64 hex digits.
std::string sha256_hex(const std::string& data);

} // namespace monkey
