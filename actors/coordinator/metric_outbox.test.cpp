// SPDX-License-Identifier: Apache-2.0
#include "actors/coordinator/metric_outbox.hpp"

#include <catch2/catch.hpp>

using namespace monkey;

namespace {

metric_point point(int64_t step) {
  metric_point p;
  p.key = "loss";
  p.step = step;
  return p;
}

std::vector<int64_t> steps(const std::vector<metric_point>& batch) {
  std::vector<int64_t> out;
  for (auto& p : batch)
    out.push_back(p.step);
  return out;
}

} // namespace

TEST_CASE("metric outbox: one batch in flight per holder, failures resent first",
          "[metric_outbox]") {
  metric_outbox box(3, 100);
  for (int i = 1; i <= 5; ++i)
    box.add("a", point(i));
  box.add("b", point(1));
  CHECK(box.ready() == std::vector<std::string>{"a", "b"});
  auto first = box.take("a");
  CHECK(steps(first) == std::vector<int64_t>{1, 2, 3}); // at most max_batch, oldest first
  CHECK(box.in_flight("a"));
  CHECK(box.take("a").empty()); // one batch at a time
  CHECK(box.ready() == std::vector<std::string>{"b"});
  box.add("a", point(6)); // gathered while the batch is out
  box.failed("a", first);
  CHECK_FALSE(box.in_flight("a"));
  CHECK(box.waiting("a") == 6);
  CHECK(steps(box.take("a")) == std::vector<int64_t>{1, 2, 3}); // the failed batch again
  box.acked("a");
  CHECK(steps(box.take("a")) == std::vector<int64_t>{4, 5, 6});
  box.add("a", point(7));
  CHECK(box.ready().size() == 1);                               // b only
  CHECK(box.ready(true) == std::vector<std::string>{"a", "b"}); // a flush sends a's too
  CHECK(steps(box.take("a", true)) == std::vector<int64_t>{7}); // a second batch in flight
  box.acked("a");
  CHECK(box.in_flight("a"));
  box.acked("a");
  CHECK(box.waiting("a") == 0);
  CHECK(box.ready() == std::vector<std::string>{"b"});
  CHECK(box.dropped() == 0);
}

TEST_CASE("metric outbox: bounded per holder, a gone holder's points are dropped",
          "[metric_outbox]") {
  metric_outbox box(10, 4);
  for (int i = 1; i <= 6; ++i)
    box.add("a", point(i));
  CHECK(box.waiting("a") == 4);
  CHECK(box.dropped() == 2); // the oldest went
  auto batch = box.take("a");
  CHECK(steps(batch) == std::vector<int64_t>{3, 4, 5, 6});
  for (int i = 7; i <= 8; ++i)
    box.add("a", point(i));
  box.failed("a", batch); // 6 waiting again, over the bound of 4
  CHECK(box.waiting("a") == 4);
  CHECK(steps(box.take("a")) == std::vector<int64_t>{5, 6, 7, 8});
  box.drop("a"); // its batch in flight is counted when its answer comes
  CHECK(box.waiting() == 0);
  CHECK(box.dropped() == 4);
  box.failed("a", {point(5), point(6), point(7), point(8)}); // after the drop: not kept
  CHECK(box.waiting("a") == 0);
  CHECK(box.dropped() == 8);
  CHECK(box.ready().empty());
}
