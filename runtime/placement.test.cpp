// SPDX-License-Identifier: Apache-2.0
#include "runtime/placement.hpp"

#include <catch2/catch.hpp>

using namespace monkey;

namespace {

resources node(int cpus, int gpus = 0) {
  resources r;
  r.cpus = cpus;
  r.mem_mb = 1 << 20;
  r.gpus = gpus;
  r.gpu_mem_mb = 80000;
  return r;
}

queued_job job(uint64_t seq, int cpus, int prio = 0, double timeout = 0) {
  queued_job q;
  q.id = job_id{seq, seq};
  q.label = "J" + std::to_string(seq);
  q.submit_seq = seq;
  q.priority = prio;
  q.need.cpus = cpus;
  q.timeout_s = timeout;
  return q;
}

bool starts(const placement_plan& p, uint64_t seq) {
  for (auto& id : p.start)
    if (id.hi == seq)
      return true;
  return false;
}

} // namespace

TEST_CASE("placement is first-come-first-served within a priority", "[runtime][placement]") {
  auto p = plan_placement(node(2), {}, {job(1, 1), job(2, 1), job(3, 1)}, 0);
  CHECK(starts(p, 1));
  CHECK(starts(p, 2));
  CHECK_FALSE(starts(p, 3));
}

TEST_CASE("a higher priority goes first regardless of submission order",
          "[runtime][placement]") {
  auto p = plan_placement(node(1), {}, {job(1, 1, 0), job(2, 1, 5)}, 0);
  REQUIRE(p.start.size() == 1);
  CHECK(starts(p, 2));
}

TEST_CASE("EASY backfill: a later job starts only if it ends before the reservation",
          "[runtime][placement]") {
  // 5 cpus; a running job holds 3 until t=100 s. Job 1 needs 5: reservation at 100 s.
  std::vector<running_job> running{{job_id{9, 9}, node(3), 100000}};
  running[0].use.mem_mb = 0;
  auto short_job = job(2, 1, 0, 50);   // ends at 50 s: may backfill
  auto long_job = job(3, 1, 0, 500);   // ends at 500 s: may not
  auto no_limit = job(4, 1, 0, 0);     // no timeout: may not
  auto p = plan_placement(node(5), running, {job(1, 5), long_job, no_limit, short_job}, 0);
  CHECK(p.reserved == (job_id{1, 1}));
  CHECK(p.reservation_ms == 100000);
  CHECK(starts(p, 2));
  CHECK_FALSE(starts(p, 3));
  CHECK_FALSE(starts(p, 4));
  CHECK_THAT(p.why.at(job_id{3, 3}), Catch::Contains("behind reservation of job J1"));
  CHECK_THAT(p.why.at(job_id{4, 4}), Catch::Contains("has none"));
  CHECK_THAT(p.why.at(job_id{1, 1}), Catch::Contains("holds the reservation"));
}

TEST_CASE("no backfill when the reservation time is unknown", "[runtime][placement]") {
  std::vector<running_job> running{{job_id{9, 9}, node(3), no_end}};
  running[0].use.mem_mb = 0;
  auto p = plan_placement(node(4), running, {job(1, 4), job(2, 1, 0, 1)}, 0);
  CHECK(p.start.empty());
  CHECK_THAT(p.why.at(job_id{2, 2}), Catch::Contains("unknown time"));
}

TEST_CASE("a job that can never fit says why and does not block others",
          "[runtime][placement]") {
  auto gpu_job = job(1, 1);
  gpu_job.need.gpus = 2;
  auto p = plan_placement(node(2, 0), {}, {gpu_job, job(2, 1)}, 0);
  CHECK(p.why.at(job_id{1, 1}) == "needs 2 gpus; this node has 0");
  CHECK(starts(p, 2));
  CHECK(p.reserved.empty());
}

TEST_CASE("jobs waiting for dependencies are skipped with their reason",
          "[runtime][placement]") {
  auto waiting = job(1, 1);
  waiting.blocked = "waits for job X";
  auto p = plan_placement(node(2), {}, {waiting, job(2, 1)}, 0);
  CHECK(p.why.at(job_id{1, 1}) == "waits for job X");
  CHECK(starts(p, 2));
}

TEST_CASE("missing tags and memory make a job unplaceable", "[runtime][placement]") {
  auto tagged = job(1, 1);
  tagged.need.tags = {"fast"};
  auto hungry = job(2, 1);
  hungry.need.mem_mb = (1 << 20) + 1;
  auto p = plan_placement(node(2), {}, {tagged, hungry}, 0);
  CHECK_THAT(p.why.at(job_id{1, 1}), Catch::Contains("tag 'fast'"));
  CHECK_THAT(p.why.at(job_id{2, 2}), Catch::Contains("MB memory"));
}

TEST_CASE("placement decides the same with and without explanations", "[runtime][placement]") {
  std::vector<running_job> running{{job_id{9, 9}, node(3), 100000}};
  running[0].use.mem_mb = 0;
  std::vector<queued_job> queue{job(1, 5), job(2, 1, 0, 50), job(3, 1, 0, 500), job(4, 1, 3)};
  auto with = plan_placement(node(5), running, queue, 0, true);
  auto without = plan_placement(node(5), running, queue, 0, false);
  CHECK(with.start == without.start);
  CHECK(with.reserved == without.reserved);
  CHECK(with.reservation_ms == without.reservation_ms);
  CHECK_FALSE(with.why.empty());
  CHECK(without.why.empty());
}

TEST_CASE("reservations are granted by priority across owners and the node's own queue",
          "[runtime][placement]") {
  // One free cpu; two owners ask, the later one with a higher priority.
  auto low = job(10, 1, 1), high = job(11, 1, 5);
  auto g = grant_reservations(node(1), {}, {}, {low, high}, 0);
  REQUIRE(g.size() == 1);
  CHECK(g.front().hi == 11);
  // The node's own job of equal priority goes first; a lower one yields.
  CHECK(grant_reservations(node(1), {}, {job(1, 1, 5)}, {job(12, 1, 5)}, 0).empty());
  auto over_own = grant_reservations(node(1), {}, {job(1, 1, 0)}, {job(13, 1, 5)}, 0);
  REQUIRE(over_own.size() == 1);
  CHECK(over_own.front().hi == 13);
  // Room for both: both granted; no room at all: none.
  CHECK(grant_reservations(node(2), {}, {}, {job(14, 1), job(15, 1)}, 0).size() == 2);
  std::vector<running_job> busy{{job_id{9, 9}, node(2), no_end}};
  busy[0].use.mem_mb = 0;
  CHECK(grant_reservations(node(2), busy, {}, {job(16, 1)}, 0).empty());
}
