// SPDX-License-Identifier: Apache-2.0
#include "actors/coordinator/job_book.hpp"

#include <algorithm>
#include <cstdio>

#include "runtime/sweep/sweep_spec.hpp"

namespace monkey {

job_record* job_book::owned(const job_id& id) {
  auto it = owned_.find(id);
  return it == owned_.end() ? nullptr : &it->second;
}

const job_record* job_book::owned(const job_id& id) const {
  auto it = owned_.find(id);
  return it == owned_.end() ? nullptr : &it->second;
}

const held_copy* job_book::held(const job_id& id) const {
  auto it = held_.find(id);
  return it == held_.end() ? nullptr : &it->second;
}

const job_record* job_book::find(const job_id& id) const {
  if (auto* r = owned(id))
    return r;
  if (auto* h = held(id))
    return &h->rec;
  auto it = unsynced_.find(id);
  return it == unsynced_.end() ? nullptr : &it->second;
}

void job_book::index_key(const job_record& rec) {
  if (rec.client_key.empty())
    return;
  auto& ids = by_key_[rec.client_key];
  if (std::find(ids.begin(), ids.end(), rec.id) == ids.end())
    ids.push_back(rec.id);
}

void job_book::unindex_key(const job_record& rec) {
  if (rec.client_key.empty())
    return;
  auto it = by_key_.find(rec.client_key);
  if (it == by_key_.end())
    return;
  auto& ids = it->second;
  ids.erase(std::remove(ids.begin(), ids.end(), rec.id), ids.end());
  if (ids.empty())
    by_key_.erase(it);
}

job_record& job_book::own(job_record rec) {
  auto id = rec.id;
  held_.erase(id);
  unsynced_.erase(id);
  if (auto it = owned_.find(id); it != owned_.end())
    queue_.erase({it->second.submit_seq, id});
  see_seq(rec.submit_seq);
  index_key(rec);
  auto& slot = owned_[id];
  slot = std::move(rec);
  if (slot.state == job_state::queued)
    queue_.insert({slot.submit_seq, id});
  return slot;
}

void job_book::hold(job_record rec, bool confirmed) {
  auto id = rec.id;
  if (auto it = owned_.find(id); it != owned_.end()) {
    queue_.erase({it->second.submit_seq, id});
    owned_.erase(it);
  }
  unsynced_.erase(id);
  index_key(rec);
  held_[id] = held_copy{std::move(rec), confirmed};
}

void job_book::confirm(const job_id& id) {
  if (auto it = held_.find(id); it != held_.end())
    it->second.confirmed = true;
}

void job_book::unconfirm_all() {
  for (auto& [id, h] : held_)
    h.confirmed = false;
}

void job_book::erase(const job_id& id) {
  if (auto it = owned_.find(id); it != owned_.end()) {
    queue_.erase({it->second.submit_seq, id});
    unindex_key(it->second);
    owned_.erase(it);
  }
  if (auto it = held_.find(id); it != held_.end()) {
    unindex_key(it->second.rec);
    held_.erase(it);
  }
  if (auto it = unsynced_.find(id); it != unsynced_.end()) {
    unindex_key(it->second);
    unsynced_.erase(it);
  }
}

void job_book::park(job_record rec) {
  auto id = rec.id;
  if (auto it = owned_.find(id); it != owned_.end()) {
    queue_.erase({it->second.submit_seq, id});
    owned_.erase(it);
  }
  held_.erase(id);
  see_seq(rec.submit_seq);
  index_key(rec);
  unsynced_[id] = std::move(rec);
}

std::optional<job_record> job_book::unpark(const job_id& id) {
  auto it = unsynced_.find(id);
  if (it == unsynced_.end())
    return std::nullopt;
  auto rec = std::move(it->second);
  unsynced_.erase(it);
  return rec;
}

void job_book::requeue_if_queued(const job_id& id) {
  auto it = owned_.find(id);
  if (it == owned_.end())
    return;
  if (it->second.state == job_state::queued)
    queue_.insert({it->second.submit_seq, id});
  else
    queue_.erase({it->second.submit_seq, id});
}

void job_book::dequeue(const job_id& id) {
  if (auto it = owned_.find(id); it != owned_.end())
    queue_.erase({it->second.submit_seq, id});
}

std::vector<job_id> job_book::by_key(const std::string& key) const {
  auto it = by_key_.find(key);
  return it == by_key_.end() ? std::vector<job_id>{} : it->second;
}

id_matcher job_book::match(const std::string& text) const {
  id_matcher m(text, "job");
  for (auto& [id, rec] : owned_)
    m.offer(id);
  for (auto& [id, h] : held_)
    m.offer(id);
  for (auto& [id, rec] : unsynced_)
    m.offer(id);
  return m;
}

// ---- transitions -----------------------------------------------------------------------

void touch(job_record& rec, job_state state, std::string reason, int64_t now) {
  rec.state = state;
  rec.reason = std::move(reason);
  rec.version += 1;
  rec.updated_ms = now;
}

attempt_record& begin_attempt(job_record& rec, const attempt_id& id, int64_t now,
                              const std::string& log_dir, std::vector<int32_t> gpus) {
  attempt_record at;
  at.id = id;
  at.number = static_cast<int32_t>(rec.attempts.size()) + 1;
  at.outcome = "running";
  at.started_ms = now;
  at.log_out = log_dir + "/" + std::to_string(at.number) + ".out";
  at.log_err = log_dir + "/" + std::to_string(at.number) + ".err";
  at.gpus = std::move(gpus);
  rec.attempts.push_back(std::move(at));
  touch(rec, job_state::running, "attempt " + std::to_string(rec.attempts.back().number)
                                   + " started",
        now);
  return rec.attempts.back();
}

bool end_attempt(job_record& rec, int32_t number, const attempt_end& end, int64_t now) {
  if (rec.state != job_state::running || rec.attempts.empty()
      || rec.attempts.back().number != number)
    return false;
  auto& at = rec.attempts.back();
  at.outcome = end.outcome;
  at.cause = end.cause;
  at.ended_ms = now;
  at.exit_code = end.exit.exit_code;
  at.term_signal = end.exit.term_signal;
  at.max_rss_kb = end.exit.max_rss_kb;
  at.cpu_s = end.exit.cpu_s;
  auto label = "attempt " + std::to_string(number) + ": " + end.cause;
  if (end.outcome == "succeeded") {
    touch(rec, job_state::succeeded, label, now);
  } else if (end.outcome == "cancelled") {
    touch(rec, job_state::cancelled, label, now);
  } else if (end.outcome == "stopped") {
    touch(rec, job_state::stopped, label, now);
  } else if (end.outcome == "requeued") {
    touch(rec, job_state::queued, label + "; requeued without charging a retry", now);
  } else if (rec.spec.driver && end.exit.term_signal == 0
             && end.exit.exit_code == sweep::sweep_failed_exit) {
    touch(rec, job_state::failed, label, now); // the sweep failed: another attempt would too
  } else if (rec.retries_used < rec.spec.retries) {
    rec.retries_used += 1;
    auto delay = retry_delay_s(rec.spec, rec.retries_used);
    rec.not_before_ms = now + static_cast<int64_t>(delay * 1000);
    char wait[64] = "";
    if (delay > 0)
      std::snprintf(wait, sizeof(wait), " after a backoff of %g s", delay);
    touch(rec, job_state::queued,
          label + "; retry " + std::to_string(rec.retries_used) + " of "
            + std::to_string(rec.spec.retries) + wait,
          now);
  } else {
    touch(rec, end.outcome == "timeout" ? job_state::timed_out : job_state::failed, label, now);
  }
  return true;
}

void mark_lost(job_record& rec, const std::string& cause, int64_t now) {
  if (!rec.attempts.empty() && rec.attempts.back().outcome == "running") {
    auto& at = rec.attempts.back();
    at.outcome = "lost";
    at.cause = cause;
    at.ended_ms = now;
  }
  if (rec.requeues_used < rec.spec.max_requeues) {
    rec.requeues_used += 1;
    touch(rec, job_state::queued,
          cause + "; requeue " + std::to_string(rec.requeues_used) + " of "
            + std::to_string(rec.spec.max_requeues) + " (retries not charged)",
          now);
  } else {
    touch(rec, job_state::lost, cause + "; no requeues left", now);
  }
}

dependency_check check_dependencies(
  const job_record& rec, const std::function<std::optional<job_state>(const job_id&)>& state_of) {
  dependency_check out;
  std::string waits;
  for (auto& dep : rec.spec.after) {
    auto s = state_of(dep.job);
    if (!s) {
      out.ask.push_back(dep.job);
      continue;
    }
    if (!is_final(*s)) {
      if (waits.empty())
        waits = "waits for job " + dep.job.short_str() + " (" + dep.kind + ", now "
                + to_string(*s) + ")";
      continue;
    }
    if (dep.kind == "ok" && *s != job_state::succeeded) {
      out.kind = dependency_check::never;
      out.text = "dependency " + dep.job.short_str() + " ended " + to_string(*s)
                 + ", so --after ok can never be met";
      out.ask.clear();
      return out;
    }
  }
  if (!out.ask.empty()) {
    out.kind = dependency_check::unknown;
    out.text = "waits to learn the state of job " + out.ask.front().short_str()
               + " from the other members";
  } else if (!waits.empty()) {
    out.kind = dependency_check::waiting;
    out.text = waits;
  }
  return out;
}

} // namespace monkey
