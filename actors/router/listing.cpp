// SPDX-License-Identifier: Apache-2.0
#include "actors/router/listing.hpp"

#include <algorithm>

namespace monkey {

bool row_stands_over(const job_summary& a, const job_summary& b) {
  bool fa = a.final || is_final(a.state), fb = b.final || is_final(b.state);
  if (fa != fb)
    return fa;
  if (a.version != b.version)
    return fa ? a.version < b.version : a.version > b.version;
  return a.owner < b.owner;
}

void merge_rows(std::map<job_id, job_summary>& into, const std::vector<job_summary>& rows) {
  for (auto& r : rows) {
    auto it = into.find(r.id);
    if (it == into.end()) {
      into[r.id] = r;
      continue;
    }
    // Metrics come from the node that ran the job, which need not hold the standing copy.
    auto metrics = r.metrics.empty() ? it->second.metrics : r.metrics;
    // Point counts take the largest per key: the sweep driver reads a trial again when the
    // listed count differs from the count of the series it last read. A read answered by a
    // member behind the others can leave the two equal while the trial goes on reporting:
    // the driver also reads every running trial every few seconds.
    auto counts = it->second.metric_counts;
    for (auto& [key, n] : r.metric_counts)
      counts[key] = std::max(counts[key], n);
    if (row_stands_over(r, it->second))
      it->second = r;
    it->second.metrics = std::move(metrics);
    it->second.metric_counts = std::move(counts);
  }
}

namespace {

/// True when some holder of `s` is this node, alive or suspect; the others go to `down`.
bool some_holder_reachable(const job_summary& s, const std::string& self,
                           const std::function<member_state(const std::string&)>& state_of,
                           std::vector<std::string>& down) {
  bool reachable = false;
  for (auto& h : s.holders) {
    auto st = h == self ? member_state::alive : state_of(h);
    if (st == member_state::alive || st == member_state::suspect)
      reachable = true;
    else
      down.push_back(h);
  }
  return reachable;
}

void mark_unavailable(job_summary& row, const std::vector<std::string>& down) {
  row.unavailable = true;
  std::string who;
  for (auto& d : down)
    who += (who.empty() ? "" : ", ") + d;
  row.reason = "unavailable (replicas down: every holder is dead: " + who
               + "); it returns when a holder restarts on its data directory";
}

} // namespace

void remember_and_mark(std::map<job_id, job_summary>& seen, std::map<job_id, job_summary>& merged,
                       bool filtered, const std::string& self,
                       const std::function<member_state(const std::string&)>& state_of,
                       int64_t now, size_t max_seen) {
  for (auto& [id, s] : merged) {
    if (s.unavailable)
      continue;
    seen[id] = s;
    // An unfinished row that only a node it does not name answered with (a copy left on a
    // former owner that gave the job up, or on a former holder): every holder it names is
    // dead, so nothing runs or adopts it until one returns. Listed as what it is, not as
    // queued or running.
    std::vector<std::string> down;
    if (!s.final && !s.holders.empty() && !some_holder_reachable(s, self, state_of, down))
      mark_unavailable(s, down);
  }
  for (auto& [id, s] : seen) {
    if (merged.count(id))
      continue;
    std::vector<std::string> down;
    bool reachable = some_holder_reachable(s, self, state_of, down);
    if (filtered)
      continue;
    if (reachable || s.holders.empty()) {
      // Not in any answer although a holder lives: the list is partial (that holder is
      // named as unreachable) and the last known row is shown, marked so; or the job was
      // removed by retention (then it is forgotten after a day).
      if (now - s.updated_ms < 86'400'000) {
        auto row = s;
        row.reason = "last known (its holders did not answer): " + s.reason;
        merged[id] = row;
      }
      continue;
    }
    auto row = s;
    mark_unavailable(row, down);
    merged[id] = row;
  }
  if (seen.size() > max_seen) {
    std::vector<std::pair<int64_t, job_id>> order;
    order.reserve(seen.size());
    for (auto& [id, s] : seen)
      order.push_back({s.submitted_ms, id});
    std::sort(order.begin(), order.end());
    auto excess = seen.size() - max_seen;
    for (size_t i = 0; i < excess; ++i)
      seen.erase(order[i].second);
  }
}

list_reply finish_list(const std::map<job_id, job_summary>& merged, uint32_t limit) {
  list_reply r;
  r.jobs.reserve(merged.size());
  for (auto& [id, s] : merged)
    r.jobs.push_back(s);
  std::sort(r.jobs.begin(), r.jobs.end(), [](const job_summary& a, const job_summary& b) {
    return a.submitted_ms != b.submitted_ms ? a.submitted_ms < b.submitted_ms : a.id < b.id;
  });
  if (limit > 0 && r.jobs.size() > limit)
    r.jobs.erase(r.jobs.begin(), r.jobs.end() - limit);
  return r;
}

} // namespace monkey
