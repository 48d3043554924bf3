// SPDX-License-Identifier: Apache-2.0
// Metric points between the holders of a job: the node running it pushes its workers'
// points to the other holders (peer_metrics, each tick, retried while a holder does not
// answer); a node that receives a copy of a job anew pulls the points it has not seen
// (peer_metric_pull), so they follow the record to every holder it reaches.
#include "actors/coordinator/state.hpp"

#include "actors/fan_out.hpp"

namespace monkey {

/// Sends each holder the metric points gathered for it, one batch in flight per holder. A
/// batch it does not acknowledge (frozen, unreachable) waits for the next tick (`flush`:
/// what waits goes now, even beside a batch in flight); the points
/// of a holder declared dead or gone are dropped (a copy that reaches a node anew brings its
/// points along: pull_metrics).
void send_metrics(coordinator_actor* self, bool flush) {
  auto& st = self->state;
  if (!st.membership)
    return;
  for (auto& node : st.metrics_out.ready(flush)) {
    auto state = st.view.state_of(node);
    if (state == member_state::dead || state == member_state::left) {
      st.metrics_out.drop(node);
      continue;
    }
    if (state != member_state::alive)
      continue; // suspect: kept until it is alive again or declared dead
    metrics_request req{st.self_node(), st.metrics_out.take(node, flush)};
    auto body = encode(req);
    ask_node(self, st.membership, node, verb::peer_metrics, std::move(body),
             std::chrono::seconds(5))
      .then([=](const std::string&) { self->state.metrics_out.acked(node); },
            [=, points = std::move(req.points)](const caf::error& e) mutable {
              SPDLOG_LOGGER_DEBUG(self->state.log, "{} metric points to {} wait: {}",
                                  points.size(), node, caf::to_string(e));
              self->state.metrics_out.failed(node, std::move(points));
            });
  }
}

/// Journals the points of jobs held here (a node cannot fill another's journal with others).
void store_metrics(coordinator_actor* self, std::vector<metric_point> points) {
  metric_batch keep;
  for (auto& p : points)
    if (self->state.book.find(p.job))
      keep.push_back(std::move(p));
  if (!keep.empty())
    self->send(self->state.journal, atoms::metric::value, std::move(keep));
}

void on_metric_pull(coordinator_actor* self, caf::response_promise rp, const fetch_request& req) {
  // Points of jobs held here only, at most as many as one peer_metrics batch.
  id_list held;
  for (auto& id : req.ids)
    if (self->state.book.find(id))
      held.push_back(id);
  if (held.empty())
    return rp.deliver(reply(metrics_request{self->state.self_node(), {}}));
  self->request(self->state.journal, std::chrono::seconds(10), atoms::metric_sum::value, held,
                uint32_t{65536})
    .then(
      [=](metric_batch& points) mutable {
        rp.deliver(reply(metrics_request{self->state.self_node(), std::move(points)}));
      },
      [=](const caf::error& e) mutable { rp.deliver(e); });
}

void pull_metrics(coordinator_actor* self, const std::string& from, std::vector<job_id> ids) {
  auto& st = self->state;
  if (ids.empty() || !st.membership || from == st.self_node())
    return;
  for (size_t i = 0; i < ids.size(); i += 4096) {
    std::vector<job_id> page(ids.begin() + static_cast<ptrdiff_t>(i),
                             ids.begin() + static_cast<ptrdiff_t>(std::min(ids.size(), i + 4096)));
    ask_node(self, st.membership, from, verb::peer_metric_pull,
             encode(fetch_request{st.self_node(), std::move(page)}), std::chrono::seconds(10))
      .then(
        [=](const std::string& body) {
          if (auto got = decode<metrics_request>(body, "metric pull"))
            store_metrics(self, std::move(got->points));
        },
        [=](const caf::error& e) {
          SPDLOG_LOGGER_DEBUG(self->state.log, "metric points from {} not pulled: {}", from,
                              caf::to_string(e));
        });
  }
}

std::vector<job_id> new_with_history(const coordinator_state& st,
                                     const std::vector<job_record>& records) {
  std::vector<job_id> out;
  for (auto& rec : records)
    if (!rec.attempts.empty() && !st.book.find(rec.id))
      out.push_back(rec.id);
  return out;
}

} // namespace monkey
