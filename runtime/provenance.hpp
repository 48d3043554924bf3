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
/// git work tree `git_commit`, `git_dirty` ("yes"/"no"), `git_diff_sha256`, and `python` for
/// a command run by python. The uncommitted diff itself goes to `*whole_diff` when given
/// (the client stores it once in the cluster, content-addressed: `git_diff_stored`), else
/// into the record (`keep_diff_inline`).
provenance_map collect_provenance(const std::string& workdir,
                                  const std::vector<std::string>& command,
                                  std::string* whole_diff = nullptr);

/// Puts `diff` into the record itself: `git_diff`, cut at `max_recorded_diff` bytes
/// (`git_diff_truncated`: "yes"). For a cluster that could not store it.
void keep_diff_inline(provenance_map& p, std::string diff);

/// Whether the record's diff is stored in the cluster under `git_diff_sha256` (the
/// checkpoint store's entry `ship-<sha256>`: `monkey reproduce ID --diff` fetches it).
bool diff_is_stored(const provenance_map& p);

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
