// SPDX-License-Identifier: Apache-2.0
#pragma once
// The coordinator's book of job records: the jobs this node owns (with the queue of those
// waiting to start, in submission order), the replicas it holds of other owners' jobs, and
// its own records that wait to hear from their other holders after a restart or a fence
// ("unsynced"). Plus the transitions of a record (attempt start and end, retries, requeues,
// lost attempts) and the dependency check. Plain C++: no CAF; job_book.test.cpp.
//
// The coordinator actor is the only writer of job records; it routes every message that
// changes one through this book.

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/expected.hpp"
#include "runtime/job.hpp"
#include "runtime/process/launcher.hpp"

namespace monkey {

/// A replica of another owner's job. `confirmed`: received from a peer (or confirmed by
/// one) since this node's start or last fence; a copy only read back from the journal may
/// be stale (this node may have been dropped as a holder meanwhile).
struct held_copy {
  job_record rec;
  bool confirmed = true;
};

class job_book {
public:
  using queue_type = std::set<std::pair<uint64_t, job_id>>;

  // ---- records -------------------------------------------------------------------------
  bool owns(const job_id& id) const { return owned_.count(id) > 0; }
  job_record* owned(const job_id& id);
  const job_record* owned(const job_id& id) const;
  const held_copy* held(const job_id& id) const;
  /// This node's copy: the owned record, else the replica, else the unsynced record.
  const job_record* find(const job_id& id) const;

  /// Inserts or replaces an owned record (from a submit, a recovery, an adoption, a
  /// hand-over or a grant): it leaves the replicas and the unsynced set, is queued when
  /// queued, and its client key is indexed.
  job_record& own(job_record rec);
  /// Keeps `rec` as a replica of another owner's job; this node stops owning it.
  void hold(job_record rec, bool confirmed = true);
  void confirm(const job_id& id);
  /// Marks every replica unconfirmed (after a fence).
  void unconfirm_all();
  void erase(const job_id& id);

  const std::unordered_map<job_id, job_record>& owned_all() const { return owned_; }
  const std::unordered_map<job_id, held_copy>& held_all() const { return held_; }

  // ---- own records waiting for their holders (restart, fence) --------------------------
  /// Moves an own record aside until its holders have been heard (no longer owned here).
  void park(job_record rec);
  std::optional<job_record> unpark(const job_id& id);
  const std::unordered_map<job_id, job_record>& unsynced() const { return unsynced_; }

  /// Calls `f(const job_record&)` for every record here: owned, held, then unsynced.
  template <class F>
  void each_record(F&& f) const {
    for (auto& [id, rec] : owned_)
      f(rec);
    for (auto& [id, h] : held_)
      f(h.rec);
    for (auto& [id, rec] : unsynced_)
      f(rec);
  }

  // ---- the queue -----------------------------------------------------------------------
  /// Owned queued jobs by (submit_seq, id): first come, first served within a priority.
  const queue_type& queue() const { return queue_; }
  /// Re-files an owned record in the queue after its state changed.
  void requeue_if_queued(const job_id& id);
  void dequeue(const job_id& id);
  uint64_t next_seq() { return ++seq_; }
  void see_seq(uint64_t seq) { seq_ = std::max(seq_, seq); }

  // ---- client keys ---------------------------------------------------------------------
  /// The jobs created by the submission with client key `key` (owned or held here).
  std::vector<job_id> by_key(const std::string& key) const;
  size_t keys() const { return by_key_.size(); }

  // ---- lookups -------------------------------------------------------------------------
  /// Matches a user's id text (full id or suffix) against the owned, held and unsynced
  /// records: match() is the job, else problem() says why not.
  id_matcher match(const std::string& text) const;

  size_t size() const { return owned_.size() + held_.size() + unsynced_.size(); }

private:
  void index_key(const job_record& rec);
  void unindex_key(const job_record& rec);
  std::unordered_map<job_id, job_record> owned_;
  std::unordered_map<job_id, held_copy> held_;
  std::unordered_map<job_id, job_record> unsynced_;
  queue_type queue_;
  std::unordered_map<std::string, std::vector<job_id>> by_key_;
  uint64_t seq_ = 0;
};

// ---- transitions -----------------------------------------------------------------------

/// Every change of a record: new state and reason, one more version, the time.
void touch(job_record& rec, job_state state, std::string reason, int64_t now);

/// Starts attempt number attempts+1 with id `id`: state running, logs in `log_dir`.
attempt_record& begin_attempt(job_record& rec, const attempt_id& id, int64_t now,
                              const std::string& log_dir, std::vector<int32_t> gpus);

/// How an attempt ended, as its worker judged it.
struct attempt_end {
  std::string outcome; ///< succeeded, failed, timeout, cancelled, requeued
  std::string cause;   ///< "exit 0", "killed by signal 9 (SIGKILL)", ...
  exit_info exit;
};

/// Applies the end of attempt `number`: final, or queued again for a retry (charged) or a
/// requeue (not charged). False when it is not the running attempt (delivered twice, or
/// stale): nothing changed.
bool end_attempt(job_record& rec, int32_t number, const attempt_end& end, int64_t now);

/// The running attempt of `rec` is lost (`cause`): requeued from --max-requeues, or lost.
void mark_lost(job_record& rec, const std::string& cause, int64_t now);

/// What a queued job's dependencies allow.
struct dependency_check {
  enum kind_t {
    met,     ///< every dependency ended as required
    waiting, ///< some have not ended yet (`text` says which)
    unknown, ///< some are not known here (`ask` lists them): ask the other members
    never,   ///< one ended so that it can never be met (`text` says why)
  } kind = met;
  std::string text;
  std::vector<job_id> ask;
};

/// `state_of` answers the last known state of a job (owned, held, or heard from another
/// member), or nothing when this node knows nothing of it.
dependency_check check_dependencies(
  const job_record& rec, const std::function<std::optional<job_state>(const job_id&)>& state_of);

} // namespace monkey
