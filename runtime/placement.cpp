// SPDX-License-Identifier: Apache-2.0
#include "runtime/placement.hpp"

#include <algorithm>

namespace monkey {

namespace {

bool fits(const resources& free, const resources& need) {
  return need.cpus <= free.cpus && need.mem_mb <= free.mem_mb && need.gpus <= free.gpus;
}

void take(resources& free, const resources& need) {
  free.cpus -= need.cpus;
  free.mem_mb -= need.mem_mb;
  free.gpus -= need.gpus;
}

void give(resources& free, const resources& need) {
  free.cpus += need.cpus;
  free.mem_mb += need.mem_mb;
  free.gpus += need.gpus;
}

std::string shortage(const resources& free, const resources& need) {
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : ", ") + s; };
  if (need.cpus > free.cpus)
    add("needs " + std::to_string(need.cpus) + " cpus, " + std::to_string(free.cpus) + " free");
  if (need.mem_mb > free.mem_mb)
    add("needs " + std::to_string(need.mem_mb) + " MB memory, " + std::to_string(free.mem_mb)
        + " MB free");
  if (need.gpus > free.gpus)
    add("needs " + std::to_string(need.gpus) + " gpus, " + std::to_string(free.gpus) + " free");
  return out;
}

std::string in_seconds(int64_t at_ms, int64_t now_ms) {
  if (at_ms == no_end)
    return "at an unknown time (a running job has no timeout)";
  auto s = std::max<int64_t>(0, (at_ms - now_ms + 999) / 1000);
  return "in about " + std::to_string(s) + " s";
}

} // namespace

std::string never_fits(const resources& total, const resources& need) {
  if (need.gpus > total.gpus)
    return "needs " + std::to_string(need.gpus) + " gpus; this node has "
           + std::to_string(total.gpus);
  if (need.cpus > total.cpus)
    return "needs " + std::to_string(need.cpus) + " cpus; this node has "
           + std::to_string(total.cpus);
  if (need.mem_mb > total.mem_mb)
    return "needs " + std::to_string(need.mem_mb) + " MB memory; this node has "
           + std::to_string(total.mem_mb) + " MB";
  if (need.gpus > 0 && need.gpu_mem_mb > total.gpu_mem_mb)
    return "needs " + std::to_string(need.gpu_mem_mb) + " MB per gpu; this node's gpus have "
           + std::to_string(total.gpu_mem_mb) + " MB";
  for (auto& tag : need.tags)
    if (std::find(total.tags.begin(), total.tags.end(), tag) == total.tags.end())
      return tag.rfind("app:", 0) == 0
               ? "needs app " + tag.substr(4) + " (name@build); this node does not have it"
               : "needs tag '" + tag + "'; this node does not offer it";
  return {};
}

placement_plan plan_placement(const resources& total, const std::vector<running_job>& running,
                              std::vector<queued_job> queue, int64_t now_ms, bool explain) {
  placement_plan out;
  resources free = total;
  std::vector<running_job> active = running;
  for (auto& r : running)
    take(free, r.use);
  std::stable_sort(queue.begin(), queue.end(), [](const queued_job& a, const queued_job& b) {
    return a.priority != b.priority ? a.priority > b.priority : a.submit_seq < b.submit_seq;
  });
  bool have_reservation = false;
  std::string reserved_label;
  for (auto& q : queue) {
    if (!q.blocked.empty()) {
      if (explain)
        out.why[q.id] = q.blocked;
      continue;
    }
    if (auto never = never_fits(total, q.need); !never.empty()) {
      if (explain)
        out.why[q.id] = never;
      continue;
    }
    auto end = q.timeout_s > 0 ? now_ms + static_cast<int64_t>(q.timeout_s * 1000) : no_end;
    if (!have_reservation) {
      if (fits(free, q.need)) {
        out.start.push_back(q.id);
        take(free, q.need);
        active.push_back({q.id, q.need, end});
        continue;
      }
      // Reservation (the "shadow time"): when enough running jobs will have ended.
      std::vector<running_job> by_end = active;
      std::sort(by_end.begin(), by_end.end(),
                [](const running_job& a, const running_job& b) { return a.end_ms < b.end_ms; });
      resources future = free;
      int64_t at = no_end;
      for (auto& r : by_end) {
        if (r.end_ms == no_end)
          break;
        give(future, r.use);
        if (fits(future, q.need)) {
          at = r.end_ms;
          break;
        }
      }
      have_reservation = true;
      reserved_label = q.label;
      out.reserved = q.id;
      out.reservation_ms = at;
      if (explain)
        out.why[q.id] = "waits for resources (" + shortage(free, q.need)
                      + "); holds the reservation, can start " + in_seconds(at, now_ms);
      continue;
    }
    // Behind the reservation: backfill only what surely ends before it starts.
    bool ends_in_time = out.reservation_ms != no_end && end != no_end && end <= out.reservation_ms;
    if (fits(free, q.need) && ends_in_time) {
      out.start.push_back(q.id);
      take(free, q.need);
      active.push_back({q.id, q.need, end});
      continue;
    }
    if (!explain)
      continue;
    std::string why = "behind reservation of job " + reserved_label + " (it can start "
                      + in_seconds(out.reservation_ms, now_ms) + ")";
    if (!fits(free, q.need))
      why += "; " + shortage(free, q.need);
    else if (q.timeout_s <= 0)
      why += "; backfill needs a timeout or a time estimate that ends before then, and this job "
             "has none";
    else
      why += "; its timeout (or time estimate) of " + std::to_string(static_cast<int64_t>(q.timeout_s))
             + " s would end after the reservation starts";
    out.why[q.id] = why;
  }
  return out;
}

std::vector<job_id> grant_reservations(const resources& total,
                                       const std::vector<running_job>& running,
                                       std::vector<queued_job> own_queue,
                                       std::vector<queued_job> requests, int64_t now_ms) {
  uint64_t seq = 0;
  for (auto& q : own_queue)
    seq = std::max(seq, q.submit_seq);
  std::vector<job_id> asked;
  for (auto& r : requests) {
    r.submit_seq = ++seq; // after this node's own jobs, in order of arrival
    asked.push_back(r.id);
    own_queue.push_back(std::move(r));
  }
  auto plan = plan_placement(total, running, std::move(own_queue), now_ms, false);
  std::vector<job_id> granted;
  for (auto& id : plan.start)
    if (std::find(asked.begin(), asked.end(), id) != asked.end())
      granted.push_back(id);
  return granted;
}

} // namespace monkey
