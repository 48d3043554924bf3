// SPDX-License-Identifier: Apache-2.0
#pragma once
// Tasks: the light kind of work. A task is a call of a built-in function (no child
// process); tasks are submitted in batches ("run 10,000 noop tasks"), journaled only when
// accepted (one record per batch) and when final (one record per contiguous range of
// tasks that ended alike), and executed through coordinator → device proxy → worker in
// chunks. Plain C++: no CAF. The coordinator keeps a `task_book`; docs/tasks.md.

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/wire/codec.hpp"
#include "runtime/expected.hpp"
#include "runtime/ids.hpp"

namespace monkey {

/// A built-in task function: runs task `index` of a batch with the batch's `arg`;
/// returns "" on success or the cause of its failure in plain words.
using task_fn = std::string (*)(uint64_t arg, uint64_t index);

/// The task kinds this build knows: noop, sleep (arg µs), fail_every (fails when
/// index % arg == 0). nullptr for an unknown kind.
task_fn find_task_kind(const std::string& kind);
std::vector<std::string> task_kinds();

/// Largest batch one submit may ask for.
constexpr uint64_t max_tasks_per_batch = 10'000'000;

/// The accept record of a batch.
struct task_batch {
  job_id id;
  std::string kind;
  uint64_t arg = 0;
  uint64_t count = 0;
  int32_t priority = 0;
  node_id owner;
  std::string user;
  std::string host;
  std::string client_key;
  int64_t submitted_ms = 0;
  MSGPACK_DEFINE_MAP(id, kind, arg, count, priority, owner, user, host, client_key, submitted_ms);
};

/// The final record of tasks [first, first + count) of a batch.
struct task_range {
  job_id batch;
  uint64_t first = 0;
  uint64_t count = 0;
  bool ok = true;
  std::string cause; ///< why they failed ("" when ok)
  int64_t ended_ms = 0;
  MSGPACK_DEFINE_MAP(batch, first, count, ok, cause, ended_ms);
};

/// Tasks [first, first + count) of a batch, on their way to a worker.
struct task_chunk {
  uint64_t seq = 0; ///< unique per coordinator incarnation
  job_id batch;
  task_fn fn = nullptr;
  uint64_t arg = 0;
  uint64_t first = 0;
  uint64_t count = 0;
};

/// What a worker reports for a chunk: the failed tasks by index (all others succeeded).
struct chunk_result {
  uint64_t seq = 0;
  job_id batch;
  uint64_t first = 0;
  uint64_t count = 0;
  std::vector<std::pair<uint64_t, std::string>> failures;
};

/// Sorts final records and merges neighbours of one batch that ended alike and ok, so a
/// grouped commit writes as few rows as it can.
void merge_ranges(std::vector<task_range>& ranges);

/// A set of disjoint half-open ranges of task indices, merged as they are added.
class range_set {
public:
  /// Adds [first, end); returns the parts that were not in the set yet.
  std::vector<std::pair<uint64_t, uint64_t>> add(uint64_t first, uint64_t end);
  uint64_t covered() const { return covered_; }
  /// The gaps of [0, n) not in the set.
  std::vector<std::pair<uint64_t, uint64_t>> gaps(uint64_t n) const;
  size_t pieces() const { return ranges_.size(); }

private:
  std::map<uint64_t, uint64_t> ranges_; ///< first → end
  uint64_t covered_ = 0;
};

/// Progress of one batch, as listed by `monkey tasks`.
struct task_batch_status {
  job_id id;
  std::string kind;
  uint64_t arg = 0;
  uint64_t count = 0;
  uint64_t succeeded = 0; ///< final and durable
  uint64_t failed = 0;
  int64_t submitted_ms = 0;
  int64_t finished_ms = 0; ///< 0 while not all are final
  std::string first_failure;
  MSGPACK_DEFINE_MAP(id, kind, arg, count, succeeded, failed, submitted_ms, finished_ms,
                     first_failure);
};

/// The coordinator's book of task batches: what waits, what runs where, what is done.
class task_book {
public:
  /// Adds an accepted batch, with the ranges already final (recovery); its other tasks
  /// are queued by priority, then in order of arrival.
  void add(const task_batch& b, const std::vector<task_range>& done);

  /// The next chunk of at most `max` tasks, or nullopt when nothing waits.
  std::optional<task_chunk> next(uint64_t max);

  /// Applies a worker's report. Returns the final records it makes (only tasks not final
  /// before: a chunk run twice is recorded once) and forgets the chunk.
  std::vector<task_range> report(const chunk_result& r, int64_t now);

  /// Puts a chunk that will not report back (its proxy died) in front of the queue again.
  void requeue(uint64_t seq);

  /// Records that final ranges are durable; returns the batches that became complete.
  std::vector<job_id> durable(const std::vector<task_range>& ranges, int64_t now);

  bool has(const job_id& id) const { return batches_.count(id) > 0; }
  bool complete(const job_id& id) const;
  std::optional<task_batch_status> status(const job_id& id) const;
  std::vector<task_batch_status> list() const;
  uint64_t queued_tasks() const { return queued_tasks_; }
  size_t in_flight() const { return in_flight_.size(); }
  /// Forgets complete batches that finished before `cutoff_ms`; returns how many.
  size_t forget_finished(int64_t cutoff_ms);
  std::optional<job_id> by_key(const std::string& key) const;

private:
  struct entry {
    task_batch batch;
    task_fn fn = nullptr;
    range_set final_;   ///< reported final (maybe not yet durable)
    uint64_t durable_ok = 0;
    uint64_t durable_failed = 0;
    std::string first_failure;
    int64_t finished_ms = 0;
  };
  struct waiting {
    job_id batch;
    uint64_t first = 0;
    uint64_t end = 0;
  };
  void enqueue_front(waiting w);
  std::unordered_map<job_id, entry> batches_;
  std::map<std::pair<int32_t, uint64_t>, std::deque<waiting>> queue_; ///< (-priority, arrival)
  std::unordered_map<uint64_t, task_chunk> in_flight_;
  std::unordered_map<std::string, job_id> keys_;
  uint64_t arrivals_ = 0;
  uint64_t chunk_seq_ = 0;
  uint64_t queued_tasks_ = 0;
};

} // namespace monkey
