// SPDX-License-Identifier: Apache-2.0
#include "actors/coordinator/metric_outbox.hpp"

namespace monkey {

void metric_outbox::trim(queue& q) {
  while (q.points.size() > max_kept_) {
    q.points.pop_front();
    ++dropped_;
  }
}

void metric_outbox::add(const std::string& holder, const metric_point& p) {
  auto& q = out_[holder];
  q.points.push_back(p);
  trim(q);
}

std::vector<std::string> metric_outbox::ready(bool flush) const {
  std::vector<std::string> out;
  for (auto& [holder, q] : out_)
    if ((flush || q.in_flight == 0) && !q.points.empty())
      out.push_back(holder);
  return out;
}

std::vector<metric_point> metric_outbox::take(const std::string& holder, bool flush) {
  std::vector<metric_point> batch;
  auto it = out_.find(holder);
  if (it == out_.end() || (it->second.in_flight > 0 && !flush))
    return batch;
  auto& q = it->second;
  auto n = std::min(q.points.size(), max_batch_);
  batch.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    batch.push_back(std::move(q.points.front()));
    q.points.pop_front();
  }
  if (!batch.empty())
    ++q.in_flight;
  return batch;
}

void metric_outbox::acked(const std::string& holder) {
  auto it = out_.find(holder);
  if (it == out_.end())
    return;
  if (it->second.in_flight > 0)
    --it->second.in_flight;
  if (it->second.in_flight == 0 && it->second.points.empty())
    out_.erase(it);
}

void metric_outbox::failed(const std::string& holder, std::vector<metric_point> batch) {
  auto it = out_.find(holder);
  if (it == out_.end()) {
    dropped_ += batch.size(); // dropped meanwhile: the holder is gone
    return;
  }
  auto& q = it->second;
  if (q.in_flight > 0)
    --q.in_flight;
  q.points.insert(q.points.begin(), std::make_move_iterator(batch.begin()),
                  std::make_move_iterator(batch.end()));
  trim(q);
}

void metric_outbox::drop(const std::string& holder) {
  auto it = out_.find(holder);
  if (it == out_.end())
    return;
  dropped_ += it->second.points.size();
  out_.erase(it);
}

size_t metric_outbox::waiting(const std::string& holder) const {
  auto it = out_.find(holder);
  return it == out_.end() ? 0 : it->second.points.size();
}

size_t metric_outbox::waiting() const {
  size_t n = 0;
  for (auto& [holder, q] : out_)
    n += q.points.size();
  return n;
}

bool metric_outbox::in_flight(const std::string& holder) const {
  auto it = out_.find(holder);
  return it != out_.end() && it->second.in_flight > 0;
}

} // namespace monkey
