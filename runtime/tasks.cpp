// SPDX-License-Identifier: Apache-2.0
#include "runtime/tasks.hpp"

#include <algorithm>
#include <thread>

namespace monkey {

namespace {

std::string run_noop(uint64_t, uint64_t) {
  return {};
}

std::string run_sleep(uint64_t arg, uint64_t) {
  std::this_thread::sleep_for(std::chrono::microseconds(arg));
  return {};
}

std::string run_fail_every(uint64_t arg, uint64_t index) {
  if (arg != 0 && index % arg == 0)
    return "task " + std::to_string(index) + " fails: its index is a multiple of "
           + std::to_string(arg);
  return {};
}

struct kind_entry {
  const char* name;
  task_fn fn;
};

constexpr kind_entry kinds[] = {
  {"noop", run_noop},
  {"sleep", run_sleep},
  {"fail_every", run_fail_every},
};

} // namespace

task_fn find_task_kind(const std::string& kind) {
  for (auto& k : kinds)
    if (kind == k.name)
      return k.fn;
  return nullptr;
}

std::vector<std::string> task_kinds() {
  std::vector<std::string> out;
  for (auto& k : kinds)
    out.emplace_back(k.name);
  return out;
}

void merge_ranges(std::vector<task_range>& ranges) {
  if (ranges.size() < 2)
    return;
  std::sort(ranges.begin(), ranges.end(), [](const task_range& a, const task_range& b) {
    return a.batch != b.batch ? a.batch < b.batch : a.first < b.first;
  });
  size_t out = 0;
  for (size_t i = 1; i < ranges.size(); ++i) {
    auto& last = ranges[out];
    auto& r = ranges[i];
    if (r.batch == last.batch && r.ok && last.ok && last.first + last.count == r.first) {
      last.count += r.count;
      last.ended_ms = std::max(last.ended_ms, r.ended_ms);
    } else {
      ranges[++out] = std::move(r);
    }
  }
  ranges.resize(out + 1);
}

// ---- range_set ----------------------------------------------------------------------

std::vector<std::pair<uint64_t, uint64_t>> range_set::add(uint64_t first, uint64_t end) {
  std::vector<std::pair<uint64_t, uint64_t>> fresh;
  if (first >= end)
    return fresh;
  // Start at the last range beginning at or before `first`.
  auto it = ranges_.upper_bound(first);
  if (it != ranges_.begin())
    --it;
  uint64_t lo = first, hi = end;
  uint64_t cursor = first; // the next index whose coverage is unknown
  while (it != ranges_.end() && it->first <= end) {
    auto [a, b] = *it;
    if (b < first) { // entirely before, not even touching
      ++it;
      continue;
    }
    if (a > cursor)
      fresh.emplace_back(cursor, std::min(a, end));
    cursor = std::max(cursor, b);
    lo = std::min(lo, a);
    hi = std::max(hi, b);
    covered_ -= b - a;
    it = ranges_.erase(it);
  }
  if (cursor < end)
    fresh.emplace_back(cursor, end);
  ranges_[lo] = hi;
  covered_ += hi - lo;
  return fresh;
}

std::vector<std::pair<uint64_t, uint64_t>> range_set::gaps(uint64_t n) const {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  uint64_t cursor = 0;
  for (auto& [a, b] : ranges_) {
    if (a >= n)
      break;
    if (a > cursor)
      out.emplace_back(cursor, a);
    cursor = std::max(cursor, b);
  }
  if (cursor < n)
    out.emplace_back(cursor, n);
  return out;
}

// ---- task_book ----------------------------------------------------------------------

void task_book::add(const task_batch& b, const std::vector<task_range>& done) {
  auto& e = batches_[b.id];
  e.batch = b;
  e.fn = find_task_kind(b.kind);
  for (auto& r : done) {
    e.final_.add(r.first, r.first + r.count);
    (r.ok ? e.durable_ok : e.durable_failed) += r.count;
    if (!r.ok && e.first_failure.empty())
      e.first_failure = r.cause;
    e.finished_ms = std::max(e.finished_ms, r.ended_ms);
  }
  if (e.final_.covered() < b.count)
    e.finished_ms = 0;
  if (!b.client_key.empty())
    keys_[b.client_key] = b.id;
  auto& q = queue_[{-b.priority, ++arrivals_}];
  for (auto [first, end] : e.final_.gaps(b.count)) {
    q.push_back({b.id, first, end});
    queued_tasks_ += end - first;
  }
  if (q.empty())
    queue_.erase({-b.priority, arrivals_});
}

std::optional<task_chunk> task_book::next(uint64_t max) {
  if (queue_.empty() || max == 0)
    return std::nullopt;
  auto qit = queue_.begin();
  auto& q = qit->second;
  auto& w = q.front();
  auto& e = batches_.at(w.batch);
  task_chunk c;
  c.seq = ++chunk_seq_;
  c.batch = w.batch;
  c.fn = e.fn;
  c.arg = e.batch.arg;
  c.first = w.first;
  c.count = std::min(max, w.end - w.first);
  w.first += c.count;
  queued_tasks_ -= c.count;
  if (w.first == w.end) {
    q.pop_front();
    if (q.empty())
      queue_.erase(qit);
  }
  in_flight_[c.seq] = c;
  return c;
}

std::vector<task_range> task_book::report(const chunk_result& r, int64_t now) {
  std::vector<task_range> out;
  in_flight_.erase(r.seq);
  auto it = batches_.find(r.batch);
  if (it == batches_.end())
    return out;
  auto& e = it->second;
  auto end = std::min(r.first + r.count, e.batch.count);
  // Failures split the chunk into ok runs and single failed tasks.
  auto failures = r.failures;
  std::sort(failures.begin(), failures.end());
  auto emit = [&](uint64_t a, uint64_t b, bool ok, const std::string& cause) {
    for (auto [x, y] : e.final_.add(a, b)) {
      if (!out.empty() && out.back().ok && ok && out.back().first + out.back().count == x) {
        out.back().count += y - x;
        continue;
      }
      out.push_back({r.batch, x, y - x, ok, cause, now});
    }
  };
  uint64_t cursor = r.first;
  for (auto& [idx, cause] : failures) {
    if (idx < cursor || idx >= end)
      continue;
    emit(cursor, idx, true, {});
    emit(idx, idx + 1, false, cause);
    cursor = idx + 1;
  }
  emit(cursor, end, true, {});
  return out;
}

void task_book::enqueue_front(waiting w) {
  auto& e = batches_.at(w.batch);
  // Ahead of everything of the same priority: it was taken from the queue first.
  auto& q = queue_[{-e.batch.priority, 0}];
  q.push_front(w);
  queued_tasks_ += w.end - w.first;
}

void task_book::requeue(uint64_t seq) {
  auto it = in_flight_.find(seq);
  if (it == in_flight_.end())
    return;
  auto c = it->second;
  in_flight_.erase(it);
  auto b = batches_.find(c.batch);
  if (b == batches_.end())
    return;
  // Only the parts that are not final yet (a chunk may have been reported in part).
  uint64_t cursor = c.first, end = c.first + c.count;
  std::vector<waiting> parts;
  for (auto [a, z] : b->second.final_.gaps(end)) {
    auto lo = std::max(a, cursor), hi = std::min(z, end);
    if (lo < hi)
      parts.push_back({c.batch, lo, hi});
  }
  for (auto p = parts.rbegin(); p != parts.rend(); ++p)
    enqueue_front(*p);
}

std::vector<job_id> task_book::durable(const std::vector<task_range>& ranges, int64_t now) {
  std::vector<job_id> complete_now;
  for (auto& r : ranges) {
    auto it = batches_.find(r.batch);
    if (it == batches_.end())
      continue;
    auto& e = it->second;
    bool was = e.durable_ok + e.durable_failed >= e.batch.count;
    (r.ok ? e.durable_ok : e.durable_failed) += r.count;
    if (!r.ok && e.first_failure.empty())
      e.first_failure = r.cause;
    if (!was && e.durable_ok + e.durable_failed >= e.batch.count) {
      e.finished_ms = now;
      complete_now.push_back(r.batch);
    }
  }
  return complete_now;
}

bool task_book::complete(const job_id& id) const {
  auto it = batches_.find(id);
  return it != batches_.end()
         && it->second.durable_ok + it->second.durable_failed >= it->second.batch.count;
}

std::optional<task_batch_status> task_book::status(const job_id& id) const {
  auto it = batches_.find(id);
  if (it == batches_.end())
    return std::nullopt;
  auto& e = it->second;
  task_batch_status s;
  s.id = id;
  s.kind = e.batch.kind;
  s.arg = e.batch.arg;
  s.count = e.batch.count;
  s.succeeded = e.durable_ok;
  s.failed = e.durable_failed;
  s.submitted_ms = e.batch.submitted_ms;
  s.finished_ms = complete(id) ? e.finished_ms : 0;
  s.first_failure = e.first_failure;
  return s;
}

std::vector<task_batch_status> task_book::list() const {
  std::vector<task_batch_status> out;
  out.reserve(batches_.size());
  for (auto& [id, e] : batches_)
    out.push_back(*status(id));
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) {
    return a.submitted_ms != b.submitted_ms ? a.submitted_ms < b.submitted_ms : a.id < b.id;
  });
  return out;
}

size_t task_book::forget_finished(int64_t cutoff_ms) {
  size_t n = 0;
  for (auto it = batches_.begin(); it != batches_.end();) {
    if (complete(it->first) && it->second.finished_ms < cutoff_ms) {
      if (!it->second.batch.client_key.empty())
        keys_.erase(it->second.batch.client_key);
      it = batches_.erase(it);
      ++n;
    } else {
      ++it;
    }
  }
  return n;
}

std::optional<job_id> task_book::by_key(const std::string& key) const {
  auto it = keys_.find(key);
  if (it == keys_.end())
    return std::nullopt;
  return it->second;
}

} // namespace monkey
