// SPDX-License-Identifier: Apache-2.0
#include "apps/fmnist/split.hpp"

#include <catch2/catch.hpp>

#include <numeric>

using namespace monkey::fmnist;

namespace {
int sum(const std::vector<int>& v) {
  return std::accumulate(v.begin(), v.end(), 0);
}
} // namespace

TEST_CASE("equal and proportional shares cover the batch, speeds set the proportion",
          "[fmnist][split]") {
  CHECK(equal_shares(256, 3) == std::vector<int>{86, 85, 85});
  CHECK(proportional_shares(256, {1, 1}) == std::vector<int>{128, 128});
  CHECK(proportional_shares(300, {2, 1}) == std::vector<int>{200, 100});
  CHECK(proportional_shares(256, {2, 1}) == std::vector<int>{171, 85}); // 170.67 / 85.33
  // Unknown speeds count as the others' mean; none known: equal.
  CHECK(proportional_shares(256, {0, 50, 50}) == equal_shares(256, 3));
  CHECK(proportional_shares(10, {0, 0}) == std::vector<int>{5, 5});
  // Every worker keeps a row, however slow; the rows always add up.
  auto s = proportional_shares(16, {1000, 1, 1, 1});
  CHECK(sum(s) == 16);
  CHECK(s[1] == 1);
  CHECK(s[0] == 13);
  for (int batch : {1, 7, 64, 255, 256, 1000})
    for (auto& speed : std::vector<std::vector<double>>{{1}, {3, 1}, {1, 2, 3}, {5, 5, 1, 0.5}}) {
      auto sh = proportional_shares(batch, speed);
      CHECK(sum(sh) == batch);
    }
  CHECK(offsets_of({3, 4, 5}) == std::vector<int>{0, 3, 7});
  CHECK(shares_text({171, 85}) == "171/85");
}

TEST_CASE("the speed split follows measured step times: a worker twice as slow gets a third",
          "[fmnist][split]") {
  speed_split sp(300, {10, 10}, 5);
  CHECK(sp.shares() == std::vector<int>{150, 150});
  // The warm-up's steps do not count, however slow.
  for (int k = 0; k < 3; ++k)
    CHECK_FALSE(sp.observe({5.0, 0.001}));
  // Worker 1 takes twice as long for the same rows: after the window, 200/100.
  bool changed = false;
  for (int k = 0; k < 5; ++k)
    changed = sp.observe({0.010, 0.020});
  CHECK(changed);
  CHECK(sp.shares() == std::vector<int>{200, 100});
  // With those shares both take as long: no change (within tolerance), however often.
  for (int k = 0; k < 20; ++k)
    CHECK_FALSE(sp.observe({0.0133, 0.0133}));
  CHECK(sp.shares() == std::vector<int>{200, 100});
  // Noise of a few percent between equal workers moves nothing.
  speed_split even(256, {0, 0}, 4, 0.06, 0);
  for (int k = 0; k < 200; ++k)
    CHECK_FALSE(even.observe(k % 3 ? std::vector<double>{0.0100, 0.0103}
                                   : std::vector<double>{0.0104, 0.0100}));
  CHECK(even.shares() == std::vector<int>{128, 128});
  // The device speeds are the start.
  speed_split gpu(256, {9000, 3000}, 5);
  CHECK(gpu.shares() == std::vector<int>{192, 64});
}

TEST_CASE("ps-async's split counts a step once every worker pushed it and changes shares "
          "from a step no worker has started",
          "[fmnist][split]") {
  // 2 workers, batch 300, window of 4 steps, no warm-up; worker 1 takes twice as long.
  async_split sp(300, 2, 4, 0.1, 0);
  CHECK(sp.from() == -1);
  // Worker 0 runs 3 steps ahead: nothing counts before worker 1 pushed the same steps.
  for (int64_t s = 0; s < 3; ++s)
    CHECK_FALSE(sp.pushed(0, s, 0.010, 150));
  for (int64_t s = 0; s < 3; ++s)
    CHECK_FALSE(sp.pushed(1, s, 0.020, 150));
  CHECK_FALSE(sp.pushed(0, 3, 0.010, 150));
  CHECK_FALSE(sp.pushed(0, 4, 0.010, 150));
  CHECK_FALSE(sp.pushed(0, 5, 0.010, 150));
  // Step 3 complete: the window of 4 is full. Worker 0 pushed step 5 (and may compute 6):
  // the new shares apply from step 7.
  CHECK(sp.pushed(1, 3, 0.020, 150));
  CHECK(sp.from() == 7);
  CHECK(sp.shares() == std::vector<int>{200, 100});
  // Steps 4–6 were computed with the old shares: they never count. From 7 on, equal times
  // with the new rows move nothing.
  for (int64_t s = 4; s < 40; ++s) {
    CHECK_FALSE(sp.pushed(0, s + 2, 0.0133, s + 2 < 7 ? 150 : 200));
    CHECK_FALSE(sp.pushed(1, s, s < 7 ? 0.020 : 0.0133, s < 7 ? 150 : 100));
  }
  CHECK(sp.from() == 7);
  // Now worker 0 slows to 4x worker 1's time per row: a second change when the window
  // ends at step 42, from the latest step pushed (42) + 2; the speeds are smoothed with
  // the windows before (half weight), so worker 0 gives up rows but keeps more than half.
  bool changed = false;
  for (int64_t s = 40; s < 44 && !changed; ++s) {
    sp.pushed(0, s, 0.080, 200);
    changed = sp.pushed(1, s, 0.010, 100);
  }
  CHECK(changed);
  CHECK(sp.from() == 44);
  CHECK(sp.shares() == std::vector<int>{156, 144});
  CHECK(sum(sp.shares()) == 300);
  // Once a worker ended nothing more is decided.
  sp.ended(1);
  for (int64_t s = 44; s < 80; ++s)
    CHECK_FALSE(sp.pushed(0, s, 1.0, sp.shares()[0]));
  CHECK(sp.from() == 44);
  // Workers at different distances give the same shares: a step's time follows its rows
  // (worker 2 three times as slow per row), whichever worker runs ahead.
  auto run = [](int lead) {
    async_split x(256, 3, 5, 0.1, 1);
    auto rows_of = [&x](int64_t s, int w) {
      return x.from() >= 0 && s >= x.from() ? x.shares()[static_cast<size_t>(w)]
                                             : equal_shares(256, 3)[static_cast<size_t>(w)];
    };
    auto push = [&](int w, int64_t s) {
      int rows = rows_of(s, w);
      return x.pushed(w, s, rows * (w == 2 ? 3e-4 : 1e-4), rows);
    };
    int changes = 0;
    for (int64_t s = 0; s < 60; ++s) {
      for (int64_t k = s == 0 ? 0 : lead; k <= lead; ++k) // worker 0 `lead` steps ahead
        changes += push(0, s + k);
      changes += push(1, s);
      changes += push(2, s);
    }
    CHECK(changes == 1); // then the step times are equal: nothing more moves
    return x.shares();
  };
  auto even = run(0);
  CHECK(even == std::vector<int>{110, 110, 36});
  CHECK(run(1) == even);
  CHECK(run(3) == even);
}

TEST_CASE("parameter server shards cover the parameters once, colocated servers go round "
          "the workers, dedicated ones follow them", "[fmnist][split]") {
  ps_layout l;
  l.workers = 3;
  l.params = 10;
  for (int32_t servers : {1, 2, 3, 4, 7, 10}) {
    l.servers = servers;
    uint64_t next = 0;
    for (int32_t s = 0; s < servers; ++s) {
      auto r = l.shard(s);
      CHECK(r.first == next);
      CHECK(r.count >= 1);
      next += r.count;
    }
    CHECK(next == 10);
  }
  l.servers = 4;
  CHECK(l.shard(0).count == 3); // 10 = 3 + 3 + 2 + 2
  CHECK(l.shard(3).first == 8);
  CHECK(l.hosted_by(0) == std::vector<int32_t>{0, 3});
  CHECK(l.hosted_by(2) == std::vector<int32_t>{2});
  l.dedicated = true;
  CHECK(l.host_of(0) == 3);
  CHECK(l.host_of(3) == 6);
  CHECK(l.hosted_by(0).empty());
  CHECK(l.hosted_by(5) == std::vector<int32_t>{2});
}

TEST_CASE("recorded shares replay by step, and a wrong schedule is named", "[fmnist][split]") {
  auto [s, err] = share_schedule::parse("0:171/85;20:150/106;60:128/128", 256, 2);
  REQUIRE(err.empty());
  CHECK(s.changes() == 3);
  CHECK(s.at(0) == std::vector<int>{171, 85});
  CHECK(s.at(19) == std::vector<int>{171, 85});
  CHECK(s.at(20) == std::vector<int>{150, 106});
  CHECK(s.at(59) == std::vector<int>{150, 106});
  CHECK(s.at(1000) == std::vector<int>{128, 128});
  auto [late, e2] = share_schedule::parse("5:200/56", 256, 2);
  REQUIRE(e2.empty());
  CHECK(late.at(4) == equal_shares(256, 2)); // before the first entry: equal
  CHECK(late.at(5) == std::vector<int>{200, 56});
  auto error_of = [](const std::string& text) { return share_schedule::parse(text, 256, 2).second; };
  CHECK(error_of("0:171/85;0:150/106").find("steps must rise") != std::string::npos);
  CHECK(error_of("0:171/85/0").find("3 shares for 2 workers") != std::string::npos);
  CHECK(error_of("0:171/84").find("add up to 255, not the batch of 256") != std::string::npos);
  CHECK(error_of("0:256/0").find("every worker needs a row") != std::string::npos);
  CHECK(error_of("x:128/128").find("the step is not a number") != std::string::npos);
  CHECK(error_of("0:128/").find("'' is not a row count") != std::string::npos);
  CHECK(error_of("128/128").find("expected STEP:ROWS") != std::string::npos);
  CHECK(share_schedule::parse("", 256, 2).first.empty());
}
