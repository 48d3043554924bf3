// SPDX-License-Identifier: Apache-2.0
#pragma once
// The metric points a node owes the other holders of the jobs it runs: gathered per holder,
// sent one batch at a time, put back when a batch is not acknowledged (a frozen or briefly
// unreachable holder gets them later), dropped when the holder is gone for good. Plain
// C++: no CAF; metric_outbox.test.cpp.

#include <cstddef>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "runtime/job.hpp"

namespace monkey {

class metric_outbox {
public:
  /// At most `max_batch` points per batch, at most `max_kept` waiting per holder (the
  /// oldest go first when more arrive; `dropped()` counts them).
  explicit metric_outbox(size_t max_batch = 65536, size_t max_kept = 4 * 65536)
    : max_batch_(max_batch), max_kept_(max_kept) {}

  void add(const std::string& holder, const metric_point& p);

  /// Holders with points waiting and no batch in flight (`flush`: also those with one).
  std::vector<std::string> ready(bool flush = false) const;

  /// The next batch for `holder` (at most max_batch points, oldest first); the holder then
  /// has one more batch in flight until `acked` or `failed`. Empty while a batch is in
  /// flight, unless `flush` (an attempt's last points go out ahead of its outcome).
  std::vector<metric_point> take(const std::string& holder, bool flush = false);

  void acked(const std::string& holder);

  /// The batch was not acknowledged: its points wait again, ahead of newer ones.
  void failed(const std::string& holder, std::vector<metric_point> batch);

  /// The holder is gone (dead, left, no longer a holder of anything here): its points too.
  void drop(const std::string& holder);

  size_t waiting(const std::string& holder) const;
  size_t waiting() const;
  size_t dropped() const { return dropped_; }
  bool in_flight(const std::string& holder) const;

private:
  struct queue {
    std::deque<metric_point> points;
    int in_flight = 0;
  };
  void trim(queue& q);

  size_t max_batch_;
  size_t max_kept_;
  size_t dropped_ = 0;
  std::map<std::string, queue> out_;
};

} // namespace monkey
