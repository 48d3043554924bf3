// SPDX-License-Identifier: Apache-2.0
#include "runtime/gang_rules.hpp"

#include "runtime/job.hpp"

#include <algorithm>
#include <limits>

namespace monkey {

bool goes_before(const gang_order& a, const gang_order& b) {
  if (a.priority != b.priority)
    return a.priority > b.priority;
  if (a.submitted_ms != b.submitted_ms)
    return a.submitted_ms < b.submitted_ms;
  return a.job < b.job;
}

int32_t workers_fitting(const resources& room, const resources& per_worker) {
  for (auto& t : per_worker.tags)
    if (std::find(room.tags.begin(), room.tags.end(), t) == room.tags.end())
      return 0;
  if (per_worker.gpus > 0 && per_worker.gpu_mem_mb > room.gpu_mem_mb && room.gpu_mem_mb > 0)
    return 0;
  int64_t n = std::numeric_limits<int32_t>::max();
  auto limit = [&](int64_t have, int64_t need) {
    if (need > 0)
      n = std::min<int64_t>(n, std::max<int64_t>(0, have) / need);
  };
  limit(room.cpus, per_worker.cpus);
  limit(room.mem_mb, per_worker.mem_mb);
  limit(room.gpus, per_worker.gpus);
  return static_cast<int32_t>(n);
}

resources gang_share(const resources& total, const resources& per_worker, int32_t workers) {
  auto k = std::min(workers, workers_fitting(total, per_worker));
  if (k <= 0)
    k = workers;
  auto r = per_worker;
  r.cpus *= k;
  r.mem_mb *= k;
  r.gpus *= k;
  return r;
}

namespace {

std::vector<gang_part> greedy(const resources& per_worker, int32_t workers,
                              std::vector<node_room>& nodes, bool use_total, int32_t& fitting) {
  std::vector<std::pair<int32_t, const node_room*>> fit;
  fitting = 0;
  for (auto& n : nodes) {
    auto k = workers_fitting(use_total ? n.total : n.free, per_worker);
    if (k <= 0)
      continue;
    fit.push_back({k, &n});
    fitting = static_cast<int32_t>(std::min<int64_t>(int64_t{fitting} + k, 1 << 30));
  }
  if (fitting < workers)
    return {};
  // Fewest nodes: the most room first (a node that takes the whole gang wins); among
  // equals the fastest devices, then the owner's node, then the id.
  std::sort(fit.begin(), fit.end(), [&](const auto& a, const auto& b) {
    auto ka = std::min(a.first, workers), kb = std::min(b.first, workers);
    if (ka != kb)
      return ka > kb;
    if (a.second->speed != b.second->speed)
      return a.second->speed > b.second->speed;
    if (a.second->self != b.second->self)
      return a.second->self;
    return a.second->node < b.second->node;
  });
  std::vector<gang_part> parts;
  int32_t next = 0;
  for (auto& [k, n] : fit) {
    if (next >= workers)
      break;
    gang_part p;
    p.node = n->node;
    for (int32_t i = 0; i < k && next < workers; ++i)
      p.ranks.push_back(next++);
    parts.push_back(std::move(p));
  }
  return parts;
}

std::string per_worker_text(const resources& w) {
  std::string s = std::to_string(w.cpus) + " cpus";
  if (w.gpus > 0)
    s += ", " + std::to_string(w.gpus) + " gpus";
  if (w.mem_mb > 0)
    s += ", " + std::to_string(w.mem_mb) + " MB";
  return s;
}

} // namespace

gang_plan plan_gang(const resources& per_worker, int32_t workers, std::vector<node_room> nodes,
                    const std::string& label) {
  gang_plan out;
  int32_t now_fit = 0, ever_fit = 0;
  out.parts = greedy(per_worker, workers, nodes, false, now_fit);
  if (!out.parts.empty())
    return out;
  greedy(per_worker, workers, nodes, true, ever_fit);
  auto what = label.empty() ? std::to_string(workers) + " workers of " + per_worker_text(per_worker)
                            : label;
  if (ever_fit < workers) {
    size_t hosts = 0;
    for (auto& n : nodes)
      hosts += workers_fitting(n.total, per_worker) > 0 ? 1 : 0;
    out.never = true;
    out.why = "more workers than the live nodes have: " + what + " needed; the " + std::to_string(hosts)
              + (hosts == 1 ? " live node that can host them has" : " live nodes that can host them have")
              + " room for " + std::to_string(ever_fit) + "; it waits for a node to join";
    return out;
  }
  out.why = "waits for room for " + what + ": the live nodes have room for "
            + std::to_string(now_fit) + " now";
  return out;
}

lease_decision judge_leases(const resources& total, const std::vector<running_job>& running,
                            const std::vector<lease_hold>& held,
                            const std::vector<queued_job>& own_queue,
                            const std::vector<lease_ask>& asks, int64_t now_ms) {
  lease_decision out;
  std::vector<size_t> order(asks.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return goes_before(asks[a].order, asks[b].order);
  });
  std::vector<bool> revoked(held.size(), false);
  std::vector<running_job> granted_use;
  auto ask_id = [](size_t i) { return job_id{std::numeric_limits<uint64_t>::max(), i + 1}; };
  auto starts = [&](size_t i) {
    std::vector<running_job> busy = running;
    for (size_t h = 0; h < held.size(); ++h)
      if (!revoked[h])
        busy.push_back({job_id{std::numeric_limits<uint64_t>::max() - 1, h + 1}, held[h].use,
                        held[h].committed ? no_end : held[h].expires_ms});
    busy.insert(busy.end(), granted_use.begin(), granted_use.end());
    auto queue = own_queue;
    queued_job q;
    q.id = ask_id(i);
    q.priority = asks[i].order.priority;
    q.submit_seq = static_cast<uint64_t>(std::max<int64_t>(0, asks[i].order.submitted_ms));
    q.need = asks[i].use;
    q.timeout_s = asks[i].timeout_s;
    queue.push_back(q);
    auto plan = plan_placement(total, busy, std::move(queue), now_ms, false);
    return std::find(plan.start.begin(), plan.start.end(), q.id) != plan.start.end();
  };
  for (auto i : order) {
    bool ok = starts(i);
    std::vector<size_t> taken;
    if (!ok) {
      // Leases of later gangs, not committed yet, latest first: revoked one by one until
      // this earlier gang fits (or none is left, and nothing is revoked).
      std::vector<size_t> later;
      for (size_t h = 0; h < held.size(); ++h)
        if (!revoked[h] && !held[h].committed && goes_before(asks[i].order, held[h].order))
          later.push_back(h);
      std::sort(later.begin(), later.end(),
                [&](size_t a, size_t b) { return goes_before(held[b].order, held[a].order); });
      for (auto h : later) {
        revoked[h] = true;
        taken.push_back(h);
        if ((ok = starts(i)))
          break;
      }
      if (!ok)
        for (auto h : taken)
          revoked[h] = false;
    }
    if (!ok)
      continue;
    for (auto h : taken)
      out.revoked.push_back(held[h].id);
    out.granted.push_back(i);
    auto end = asks[i].timeout_s > 0 ? now_ms + static_cast<int64_t>(asks[i].timeout_s * 1000)
                                     : no_end;
    granted_use.push_back({ask_id(i), asks[i].use, end});
  }
  return out;
}

std::vector<std::string> hosts_of(const std::vector<gang_part>& parts) {
  std::vector<std::string> out;
  for (auto& p : parts)
    out.push_back(p.node + ":" + rank_list_text(p.ranks));
  return out;
}

} // namespace monkey
