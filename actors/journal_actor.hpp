// SPDX-License-Identifier: Apache-2.0
#pragma once
// The journal actor: the only writer of the node's journal. It runs detached (its own
// thread, since commits fsync) and groups every write that arrived while the previous
// commit ran into one transaction; each writer gets its reply only once its records are
// durable. Metrics are buffered and written in batches; a crash may lose the last batch.
//
// Messages:
//   (write, write_batch)            → true after commit, or error(journal_failure)
//   (metric, vector<metric_point>)  → nothing (buffered; flushed within 250 ms)
//   (flush, bool)                   → true once everything received is committed
//   (load)                          → vector<job_record>
//   (load_tombstones)               → vector<job_id> (jobs deleted by `monkey rm`)
//   (last_metrics, job_id)          → map<string, double>
//   (last_metrics, vector<job_id>)  → map<job_id, map<string, metric_stats>> (jobs with metrics)
//   (metric_sum, job_id)            → map<string, metric_stats>
//   (metric_sum, job_id, key, limit) → vector<metric_point> (the key's points in order)
//   (metric_sum, vector<job_id>, limit) → vector<metric_point> (every point of the jobs)
//   (compact, int64_t cutoff_ms)    → size_t (jobs removed)
//   (wal_trim, uint64_t commits)    to itself, 2 s after a commit: when no commit came since,
//                                   the write-ahead log is checkpointed and truncated

#include <memory>

#include <caf/fwd.hpp>

#include "runtime/journal/journal.hpp"

namespace monkey {

caf::actor spawn_journal(caf::actor_system& sys, std::shared_ptr<journal> store);

} // namespace monkey
