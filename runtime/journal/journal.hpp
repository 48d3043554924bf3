// SPDX-License-Identifier: Apache-2.0
#pragma once
// The durable local store of job records, transitions and metrics: SQLite in WAL mode with
// synchronous=FULL. One `journal` is owned by one journal actor, which groups many writes
// into one transaction. Plain C++: no CAF. Format: docs/journal-format.md.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/expected.hpp"
#include "runtime/job.hpp"
#include "runtime/tasks.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace monkey {

/// What one grouped commit writes.
struct write_batch {
  std::vector<job_record> records; ///< upserted whole; each also appends a transition row
  std::vector<metric_point> metrics;
  std::vector<task_batch> task_batches; ///< accept records of task batches
  std::vector<task_range> task_ranges;  ///< final records of task ranges
  std::vector<job_id> erase;            ///< jobs deleted with their transitions and metrics
  std::vector<job_id> tombstones = {};  ///< jobs deleted by `monkey rm`: no copy may return
  bool empty() const {
    return records.empty() && metrics.empty() && task_batches.empty() && task_ranges.empty()
           && erase.empty() && tombstones.empty();
  }
};

/// Result of scanning a WAL file before SQLite opens it.
struct wal_scan {
  uint64_t file_bytes = 0;
  uint64_t valid_bytes = 0;     ///< header plus frames up to the last valid commit
  uint64_t frames_valid = 0;
  bool broken_in_middle = false; ///< frames of the current generation follow a bad one
  std::string detail;
};

/// Checks a SQLite WAL file's frame checksums (the algorithm of SQLite's WAL format).
wal_scan scan_wal(const std::string& path);

class journal {
public:
  static constexpr int schema_version = 3;

  /// Opens (creating when absent) DIR/journal.db. A garbled WAL tail is ignored with a
  /// warning appended to `warnings`; corruption in the middle is a failure.
  static expected<std::unique_ptr<journal>> open(const std::string& dir,
                                                 std::vector<std::string>* warnings);
  ~journal();
  journal(const journal&) = delete;
  journal& operator=(const journal&) = delete;

  node_id node() const { return node_; }
  uint32_t incarnation() const { return incarnation_; }

  /// Writes the batch in one transaction (durable when this returns "").
  status write(const write_batch& batch);

  expected<std::vector<job_record>> load_jobs();

  /// Every task batch with its final ranges.
  struct task_state {
    task_batch batch;
    std::vector<task_range> done;
  };
  expected<std::vector<task_state>> load_tasks();

  /// Metric points of one job in time order (all keys when `key` is empty).
  expected<std::vector<metric_point>> metrics(const job_id& job, const std::string& key,
                                              size_t limit);

  /// The last value of every metric key of one job.
  expected<std::map<std::string, metric_point>> last_metrics(const job_id& job);

  /// The jobs deleted by `monkey rm` (their tombstones), oldest first.
  expected<std::vector<job_id>> load_tombstones();

  /// Count, first, min, max and last of every metric key of one job. Kept in memory per job
  /// once read and updated by every write (a job reporting each step has tens of thousands
  /// of points, and `show`, the listings and a sweep's driver ask several times a second).
  expected<std::map<std::string, metric_stats>> metric_summary(const job_id& job);

  /// The summary (count, first, min, max, last) of every metric key of the given jobs
  /// (those without metrics are left out): the listings' last values, and the point counts
  /// by which a sweep's driver sees that a trial reported something new.
  expected<std::map<job_id, std::map<std::string, metric_stats>>>
  metric_summaries_of(const std::vector<job_id>& jobs);

  /// Deletes final jobs last updated before `cutoff_ms`, with their transitions and
  /// metrics, and task batches all of whose tasks were final before it; returns how many
  /// jobs and batches went.
  /// Jobs in `keep` stay (final jobs that queued jobs still depend on).
  expected<size_t> compact(int64_t cutoff_ms, const std::vector<job_id>& keep = {});

  /// Moves the write-ahead log into the database and truncates it to nothing (the journal
  /// actor does so once writes pause: the journal at rest is one file of its own size).
  status checkpoint();

  /// Number of transition rows of a job (for tests and `show`).
  expected<size_t> transition_count(const job_id& job);

  const std::string& path() const { return path_; }

private:
  journal() = default;
  status exec(const char* sql);
  status migrate();
  status prepare();

  /// One job's metrics summed up: what metric_summary, last_metrics and metric_summaries_of
  /// answer without reading every point again.
  struct job_summary {
    std::map<std::string, metric_stats> stats;
    std::map<std::string, metric_point> last;
  };
  /// The summary of `job`: from memory, or read once from the points.
  expected<const job_summary*> summary_of(const job_id& job);
  expected<std::map<std::string, metric_stats>> read_summary(const job_id& job);
  std::unordered_map<std::string, job_summary> summaries_; ///< by job id; dropped past a bound

  sqlite3* db_ = nullptr;
  sqlite3_stmt* put_job_ = nullptr;
  sqlite3_stmt* put_transition_ = nullptr;
  sqlite3_stmt* put_metric_ = nullptr;
  sqlite3_stmt* put_tombstone_ = nullptr;
  sqlite3_stmt* del_job_ = nullptr;
  sqlite3_stmt* del_transitions_ = nullptr;
  sqlite3_stmt* del_metrics_ = nullptr;
  sqlite3_stmt* put_batch_ = nullptr;
  sqlite3_stmt* put_range_ = nullptr;
  sqlite3_stmt* batch_final_ = nullptr;
  std::string path_;
  node_id node_;
  uint32_t incarnation_ = 0;
};

} // namespace monkey
