// SPDX-License-Identifier: Apache-2.0
#include "actors/journal_actor.hpp"

#include <caf/all.hpp>

#include "runtime/wire/atoms.hpp"
#include "actors/messages.hpp"
#include "runtime/errc.hpp"
#include "runtime/faults.hpp"
#include "runtime/logging.hpp"

namespace monkey {

namespace {

struct journal_state {
  std::shared_ptr<journal> store;
  std::shared_ptr<spdlog::logger> log;
  write_batch pending;
  std::vector<caf::response_promise> waiting;
  bool flush_queued = false;
  bool metric_flush_queued = false;
  uint64_t commits = 0;      ///< successful commits so far
  bool trim_queued = false;  ///< a wal_trim is on its way
  static inline const char* name = "journal";
};

using journal_actor = caf::stateful_actor<journal_state>;

/// How long writes pause before the write-ahead log is truncated.
constexpr auto wal_trim_after = std::chrono::seconds(2);

/// A read's answer: the store's value, or journal_failure naming `what` and the problem.
template <class R, class T>
caf::result<R> answer(expected<T> got, const std::string& what = {}) {
  if (!got)
    return make_error(errc::journal_failure, what + got.error());
  return R(std::move(*got));
}

void commit(journal_actor* self) {
  auto& st = self->state;
  st.flush_queued = false;
  if (st.pending.empty() && st.waiting.empty())
    return;
  write_batch batch;
  std::swap(batch, st.pending);
  std::vector<caf::response_promise> waiting;
  std::swap(waiting, st.waiting);
  auto err = journal_fault(); // tests: a slow fsync or a full disk (runtime/faults.hpp)
  if (err)
    err = st.store->write(batch);
  if (!err) {
    st.log->error("commit of {} records, {} metrics, {} task batches and {} task ranges "
                  "failed: {}",
                  batch.records.size(), batch.metrics.size(), batch.task_batches.size(),
                  batch.task_ranges.size(), err.error());
    for (auto& rp : waiting)
      rp.deliver(make_error(errc::journal_failure, "journal write failed: " + err.error()));
    return;
  }
  SPDLOG_LOGGER_DEBUG(st.log, "committed {} records, {} metrics, {} writers", batch.records.size(),
                      batch.metrics.size(), waiting.size());
  // Once writes pause, the write-ahead log is folded into the database and truncated.
  ++st.commits;
  if (!st.trim_queued) {
    st.trim_queued = true;
    self->delayed_send(self, wal_trim_after, atoms::wal_trim::value, st.commits);
  }
  for (auto& rp : waiting)
    rp.deliver(true);
}

caf::behavior journal_impl(journal_actor* self, std::shared_ptr<journal> store) {
  self->state.store = std::move(store);
  self->state.log = logger("journal");
  return {
    [=](atoms::write, write_batch& batch) {
      auto& st = self->state;
      for (auto& r : batch.records)
        st.pending.records.push_back(std::move(r));
      for (auto& m : batch.metrics)
        st.pending.metrics.push_back(std::move(m));
      for (auto& b : batch.task_batches)
        st.pending.task_batches.push_back(std::move(b));
      for (auto& r : batch.task_ranges)
        st.pending.task_ranges.push_back(std::move(r));
      for (auto& id : batch.erase)
        st.pending.erase.push_back(id);
      for (auto& id : batch.tombstones)
        st.pending.tombstones.push_back(id);
      auto rp = self->make_response_promise();
      st.waiting.push_back(rp);
      // Everything already in the mailbox joins this commit: the flush goes behind it.
      if (!st.flush_queued) {
        st.flush_queued = true;
        self->send(self, atoms::flush::value);
      }
    },
    [=](atoms::metric, metric_batch& points) {
      auto& st = self->state;
      for (auto& p : points)
        st.pending.metrics.push_back(std::move(p));
      if (!st.metric_flush_queued) {
        st.metric_flush_queued = true;
        self->delayed_send(self, std::chrono::milliseconds(250), atoms::flush::value);
      }
    },
    [=](atoms::flush) {
      self->state.metric_flush_queued = false;
      commit(self);
    },
    [=](atoms::flush, bool) {
      commit(self); // a synchronous flush, asked for at shutdown
      return true;
    },
    [=](atoms::wal_trim, uint64_t seen) {
      auto& st = self->state;
      st.trim_queued = false;
      if (st.commits != seen || !st.pending.empty()) { // still writing: look again later
        st.trim_queued = true;
        self->delayed_send(self, wal_trim_after, atoms::wal_trim::value, st.commits);
        return;
      }
      if (auto done = st.store->checkpoint(); !done)
        st.log->warn("cannot truncate the write-ahead log: {}", done.error());
    },
    [=](atoms::load) -> caf::result<record_list> {
      commit(self); // a restarted coordinator must see every write received so far
      return answer<record_list>(self->state.store->load_jobs(), "cannot load the journal: ");
    },
    [=](atoms::load_tombstones) -> caf::result<id_list> {
      commit(self);
      return answer<id_list>(self->state.store->load_tombstones(),
                             "cannot load the tombstones: ");
    },
    [=](atoms::load_tasks) -> caf::result<task_state_list> {
      commit(self);
      return answer<task_state_list>(self->state.store->load_tasks(),
                                     "cannot load the task batches: ");
    },
    [=](atoms::last_metrics, const job_id& id) -> caf::result<metric_map> {
      commit(self); // reads see every metric received so far
      auto last = self->state.store->last_metrics(id);
      if (!last)
        return make_error(errc::journal_failure, last.error());
      metric_map out;
      for (auto& [k, m] : *last)
        out[k] = m.value;
      return out;
    },
    [=](atoms::last_metrics, const id_list& ids) -> caf::result<metrics_by_job> {
      commit(self);
      return answer<metrics_by_job>(self->state.store->metric_summaries_of(ids));
    },
    [=](atoms::metric_sum, const job_id& id) -> caf::result<metric_stats_map> {
      commit(self);
      return answer<metric_stats_map>(self->state.store->metric_summary(id));
    },
    [=](atoms::metric_sum, const job_id& id, const std::string& key,
        uint32_t limit) -> caf::result<metric_batch> {
      commit(self);
      return answer<metric_batch>(self->state.store->metrics(id, key, limit));
    },
    [=](atoms::metric_sum, const id_list& ids, uint32_t limit) -> caf::result<metric_batch> {
      commit(self);
      metric_batch out;
      for (auto& id : ids) {
        if (out.size() >= limit)
          break;
        auto points = self->state.store->metrics(id, "", limit - out.size());
        if (!points)
          return make_error(errc::journal_failure, points.error());
        out.insert(out.end(), std::make_move_iterator(points->begin()),
                   std::make_move_iterator(points->end()));
      }
      return out;
    },
    [=](atoms::compact, int64_t cutoff_ms, const id_list& keep) -> caf::result<size_t> {
      commit(self);
      auto n = self->state.store->compact(cutoff_ms, keep);
      if (!n)
        return make_error(errc::journal_failure, n.error());
      if (*n > 0)
        self->state.log->info("compacted {} finished jobs", *n);
      return *n;
    },
  };
}

} // namespace

caf::actor spawn_journal(caf::actor_system& sys, std::shared_ptr<journal> store) {
  return sys.spawn<caf::detached>(journal_impl, std::move(store));
}

} // namespace monkey
