// SPDX-License-Identifier: Apache-2.0
#include "apps/fmnist/split.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace monkey::fmnist {

std::vector<int> equal_shares(int batch, int n) {
  std::vector<int> out(static_cast<size_t>(std::max(n, 0)));
  for (int r = 0; r < n; ++r)
    out[static_cast<size_t>(r)] = batch / n + (r < batch % n ? 1 : 0);
  return out;
}

std::vector<int> proportional_shares(int batch, const std::vector<double>& speed) {
  auto n = static_cast<int>(speed.size());
  if (n == 0)
    return {};
  double known = 0;
  int counted = 0;
  for (double s : speed)
    if (s > 0 && std::isfinite(s)) {
      known += s;
      ++counted;
    }
  if (counted == 0)
    return equal_shares(batch, n);
  double mean = known / counted;
  std::vector<double> w(speed.size());
  double total = 0;
  for (size_t i = 0; i < speed.size(); ++i) {
    w[i] = speed[i] > 0 && std::isfinite(speed[i]) ? speed[i] : mean;
    total += w[i];
  }
  // Each worker's floor of its exact share (at least one row when there are rows enough),
  // then the rows left to the largest remainders, or the rows too many (from the minimum)
  // taken from the largest shares.
  int least = batch >= n ? 1 : 0;
  std::vector<int> out(speed.size());
  std::vector<double> rest(speed.size());
  int given = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    double exact = batch * w[i] / total;
    out[i] = std::max(least, static_cast<int>(std::floor(exact)));
    rest[i] = exact - std::floor(exact);
    given += out[i];
  }
  std::vector<size_t> order(w.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return rest[a] > rest[b]; });
  for (size_t k = 0; given < batch; k = (k + 1) % order.size(), ++given)
    out[order[k]] += 1;
  while (given > batch) {
    auto big = std::max_element(out.begin(), out.end());
    *big -= 1;
    --given;
  }
  return out;
}

std::vector<int> offsets_of(const std::vector<int>& shares) {
  std::vector<int> out(shares.size());
  int at = 0;
  for (size_t i = 0; i < shares.size(); ++i) {
    out[i] = at;
    at += shares[i];
  }
  return out;
}

std::string shares_text(const std::vector<int>& shares) {
  std::string out;
  for (auto s : shares)
    out += (out.empty() ? "" : "/") + std::to_string(s);
  return out;
}

speed_split::speed_split(int batch, std::vector<double> initial, int every, double tolerance,
                         int warmup)
  : batch_(batch), every_(std::max(every, 1)), tolerance_(tolerance),
    shares_(proportional_shares(batch, initial)), rows_(initial.size()),
    seconds_(initial.size()), warmup_(warmup) {}

void speed_split::resume(const std::vector<int>& shares) {
  if (shares.size() != shares_.size() || std::accumulate(shares.begin(), shares.end(), 0) != batch_
      || *std::min_element(shares.begin(), shares.end()) < 0)
    return;
  shares_ = shares;
}

bool speed_split::observe(const std::vector<double>& compute_s) {
  if (compute_s.size() != shares_.size())
    return false;
  if (warmup_ > 0) {
    --warmup_;
    return false;
  }
  for (size_t i = 0; i < shares_.size(); ++i) {
    rows_[i] += shares_[i];
    seconds_[i] += std::max(compute_s[i], 1e-9);
  }
  if (++seen_ < every_)
    return false;
  bool first = speed_.empty();
  speed_.resize(shares_.size());
  for (size_t i = 0; i < speed_.size(); ++i) {
    double now = rows_[i] / seconds_[i];
    speed_[i] = first ? now : 0.5 * speed_[i] + 0.5 * now;
  }
  auto& speed = speed_;
  std::fill(rows_.begin(), rows_.end(), 0.0);
  std::fill(seconds_.begin(), seconds_.end(), 0.0);
  seen_ = 0;
  auto next = proportional_shares(batch_, speed);
  bool worth = false;
  for (size_t i = 0; i < next.size(); ++i)
    if (std::abs(next[i] - shares_[i]) > tolerance_ * std::max(shares_[i], 1))
      worth = true;
  if (!worth)
    return false;
  shares_ = std::move(next);
  return true;
}

async_split::async_split(int batch, int workers, int every, double tolerance, int warmup)
  : batch_(batch), workers_(std::max(workers, 1)), every_(every), warmup_(warmup),
    tolerance_(tolerance), last_(static_cast<size_t>(std::max(workers, 1)), -1) {}

bool async_split::pushed(int w, int64_t step, double compute_s, int rows) {
  if (over_ || w < 0 || w >= workers_)
    return false;
  auto uw = static_cast<size_t>(w);
  last_[uw] = std::max(last_[uw], step);
  auto& t = steps_[step];
  if (t.compute.empty()) {
    t.compute.assign(static_cast<size_t>(workers_), 0.0);
    t.rows.assign(static_cast<size_t>(workers_), -1);
  }
  if (t.rows[uw] < 0)
    t.have += 1;
  t.compute[uw] = compute_s;
  t.rows[uw] = rows;
  bool changed = false;
  while (!steps_.empty() && steps_.begin()->second.have == workers_) {
    auto s = steps_.begin()->first;
    auto times = std::move(steps_.begin()->second);
    steps_.erase(steps_.begin());
    if (s < from_) // computed with the shares before the change
      continue;
    if (!split_) {
      split_ = std::make_unique<speed_split>(
        batch_, std::vector<double>(static_cast<size_t>(workers_), 0.0), every_, tolerance_,
        warmup_);
      split_->resume(times.rows);
      shares_ = split_->shares();
    }
    if (times.rows != split_->shares()) // not the rows it knows (a resumed run): go on from them
      split_->resume(times.rows);
    if (split_->observe(times.compute)) {
      from_ = *std::max_element(last_.begin(), last_.end()) + 2;
      shares_ = split_->shares();
      changed = true; // steps before from_ are the old shares': skipped once complete
    }
  }
  return changed;
}

void async_split::ended(int w) {
  (void)w;
  over_ = true;
  steps_.clear();
}

std::pair<share_schedule, std::string> share_schedule::parse(const std::string& text, int batch,
                                                             int workers) {
  share_schedule out;
  out.batch_ = batch;
  out.workers_ = workers;
  size_t start = 0;
  while (start < text.size()) {
    auto end = text.find(';', start);
    if (end == std::string::npos)
      end = text.size();
    auto entry = text.substr(start, end - start);
    start = end + 1;
    auto bad = [&](const std::string& why) {
      return std::make_pair(share_schedule{}, "shares: '" + entry + "': " + why);
    };
    auto colon = entry.find(':');
    if (colon == std::string::npos || colon == 0)
      return bad("expected STEP:ROWS/ROWS/...");
    int64_t step = 0;
    for (size_t i = 0; i < colon; ++i) {
      if (entry[i] < '0' || entry[i] > '9' || step > (int64_t{1} << 40))
        return bad("the step is not a number");
      step = step * 10 + (entry[i] - '0');
    }
    if (!out.entries_.empty() && step <= out.entries_.back().first)
      return bad("steps must rise from entry to entry");
    std::vector<int> rows;
    size_t p = colon + 1;
    while (p <= entry.size()) {
      auto slash = entry.find('/', p);
      if (slash == std::string::npos)
        slash = entry.size();
      auto part = entry.substr(p, slash - p);
      if (part.empty() || part.size() > 6 || part.find_first_not_of("0123456789") != std::string::npos)
        return bad("'" + part + "' is not a row count");
      rows.push_back(std::stoi(part));
      p = slash + 1;
    }
    if (static_cast<int>(rows.size()) != workers)
      return bad(std::to_string(rows.size()) + " shares for " + std::to_string(workers)
                 + " workers");
    int total = 0;
    for (int r : rows) {
      if (r < 1)
        return bad("every worker needs a row");
      total += r;
    }
    if (total != batch)
      return bad("the shares add up to " + std::to_string(total) + ", not the batch of "
                 + std::to_string(batch));
    out.entries_.emplace_back(step, std::move(rows));
  }
  return {std::move(out), std::string{}};
}

std::vector<int> share_schedule::at(int64_t step) const {
  const std::vector<int>* found = nullptr;
  for (auto& [from, rows] : entries_)
    if (from <= step)
      found = &rows;
  return found ? *found : equal_shares(batch_, workers_);
}

std::vector<int32_t> ps_layout::hosted_by(int32_t r) const {
  std::vector<int32_t> out;
  for (int32_t s = 0; s < servers; ++s)
    if (host_of(s) == r)
      out.push_back(s);
  return out;
}

ps_layout::range ps_layout::shard(int32_t s) const {
  auto n = static_cast<uint64_t>(servers);
  auto k = static_cast<uint64_t>(s);
  uint64_t base = params / n, extra = params % n;
  return {k * base + std::min(k, extra), base + (k < extra ? 1 : 0)};
}

} // namespace monkey::fmnist
