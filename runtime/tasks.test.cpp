// SPDX-License-Identifier: Apache-2.0
#include "runtime/tasks.hpp"

#include <catch2/catch.hpp>

using namespace monkey;

namespace {

task_batch make_batch(uint64_t count, int32_t priority = 0, std::string kind = "noop") {
  task_batch b;
  b.id = job_id::generate();
  b.kind = std::move(kind);
  b.count = count;
  b.priority = priority;
  return b;
}

chunk_result ok_result(const task_chunk& c) {
  return {c.seq, c.batch, c.first, c.count, {}};
}

} // namespace

TEST_CASE("range_set merges ranges and reports only what is new", "[tasks]") {
  range_set s;
  auto fresh = s.add(10, 20);
  REQUIRE(fresh == std::vector<std::pair<uint64_t, uint64_t>>{{10, 20}});
  fresh = s.add(15, 30); // overlaps
  REQUIRE(fresh == std::vector<std::pair<uint64_t, uint64_t>>{{20, 30}});
  fresh = s.add(0, 5);
  REQUIRE(fresh == std::vector<std::pair<uint64_t, uint64_t>>{{0, 5}});
  REQUIRE(s.pieces() == 2);
  REQUIRE(s.covered() == 25);
  fresh = s.add(0, 40); // spans both, fills the gap
  REQUIRE(fresh == std::vector<std::pair<uint64_t, uint64_t>>{{5, 10}, {30, 40}});
  REQUIRE(s.pieces() == 1);
  REQUIRE(s.covered() == 40);
  REQUIRE(s.add(3, 7).empty());
  s.add(40, 41); // touching ranges merge
  REQUIRE(s.pieces() == 1);
  REQUIRE(s.gaps(50) == std::vector<std::pair<uint64_t, uint64_t>>{{41, 50}});
}

TEST_CASE("task kinds: known ones run, unknown ones are absent", "[tasks]") {
  REQUIRE(find_task_kind("noop") != nullptr);
  REQUIRE(find_task_kind("noop")(0, 7).empty());
  auto fail = find_task_kind("fail_every");
  REQUIRE(fail(3, 6).find("multiple of 3") != std::string::npos);
  REQUIRE(fail(3, 7).empty());
  REQUIRE(find_task_kind("no_such_kind") == nullptr);
}

TEST_CASE("task_book hands out chunks by priority, then arrival", "[tasks]") {
  task_book book;
  auto low = make_batch(5, 0);
  auto high = make_batch(3, 5);
  book.add(low, {});
  book.add(high, {});
  REQUIRE(book.queued_tasks() == 8);
  auto c1 = book.next(2);
  REQUIRE(c1);
  REQUIRE(c1->batch == high.id);
  REQUIRE(c1->first == 0);
  REQUIRE(c1->count == 2);
  auto c2 = book.next(10);
  REQUIRE(c2->batch == high.id);
  REQUIRE(c2->first == 2);
  REQUIRE(c2->count == 1);
  auto c3 = book.next(10);
  REQUIRE(c3->batch == low.id);
  REQUIRE(c3->count == 5);
  REQUIRE_FALSE(book.next(10));
  REQUIRE(book.in_flight() == 3);
}

TEST_CASE("task_book records each task once, even when a chunk runs twice", "[tasks]") {
  task_book book;
  auto b = make_batch(10);
  book.add(b, {});
  auto c = *book.next(10);
  // The proxy is declared dead: the chunk goes back; then its late report arrives anyway.
  book.requeue(c.seq);
  REQUIRE(book.queued_tasks() == 10);
  auto again = *book.next(4);
  auto first = book.report(ok_result(c), 1);
  REQUIRE(first.size() == 1);
  REQUIRE(first[0].count == 10);
  auto second = book.report(ok_result(again), 2);
  REQUIRE(second.empty()); // already final: no second record
  REQUIRE_FALSE(book.complete(b.id));
  auto done = book.durable(first, 3);
  REQUIRE(done == std::vector<job_id>{b.id});
  REQUIRE(book.complete(b.id));
  auto st = *book.status(b.id);
  REQUIRE(st.succeeded == 10);
  REQUIRE(st.failed == 0);
  REQUIRE(st.finished_ms == 3);
}

TEST_CASE("task_book splits a chunk's report around failures", "[tasks]") {
  task_book book;
  auto b = make_batch(10, 0, "fail_every");
  book.add(b, {});
  auto c = *book.next(10);
  chunk_result r{c.seq, c.batch, 0, 10, {{3, "boom 3"}, {4, "boom 4"}, {9, "boom 9"}}};
  auto ranges = book.report(r, 5);
  REQUIRE(ranges.size() == 5); // [0,3) ok, 3 failed, 4 failed, [5,9) ok, 9 failed
  REQUIRE(ranges[0].ok);
  REQUIRE(ranges[0].count == 3);
  REQUIRE_FALSE(ranges[1].ok);
  REQUIRE(ranges[1].cause == "boom 3");
  REQUIRE(ranges[3].first == 5);
  REQUIRE(ranges[3].count == 4);
  book.durable(ranges, 6);
  auto st = *book.status(b.id);
  REQUIRE(st.succeeded == 7);
  REQUIRE(st.failed == 3);
  REQUIRE(st.first_failure == "boom 3");
}

TEST_CASE("task_book recovery queues only the tasks that are not final", "[tasks]") {
  task_book book;
  auto b = make_batch(100);
  std::vector<task_range> done{{b.id, 0, 40, true, "", 1}, {b.id, 60, 10, true, "", 1}};
  book.add(b, done);
  REQUIRE(book.queued_tasks() == 50);
  auto c1 = *book.next(100);
  REQUIRE(c1.first == 40);
  REQUIRE(c1.count == 20);
  auto c2 = *book.next(100);
  REQUIRE(c2.first == 70);
  REQUIRE(c2.count == 30);
  auto r = book.report(ok_result(c1), 2);
  auto r2 = book.report(ok_result(c2), 2);
  r.insert(r.end(), r2.begin(), r2.end());
  REQUIRE(book.durable(r, 3).size() == 1);
  REQUIRE(book.status(b.id)->succeeded == 100);
}

TEST_CASE("task_book requeues only the unreported part of a chunk", "[tasks]") {
  task_book book;
  auto b = make_batch(10);
  book.add(b, {});
  auto c = *book.next(10);
  // Half of it was already reported under another chunk (a duplicate run).
  book.report({999, b.id, 0, 5, {}}, 1);
  book.requeue(c.seq);
  REQUIRE(book.queued_tasks() == 5);
  auto again = *book.next(10);
  REQUIRE(again.first == 5);
  REQUIRE(again.count == 5);
}

TEST_CASE("task_book forgets finished batches after retention, and their keys", "[tasks]") {
  task_book book;
  auto b = make_batch(1);
  b.client_key = "k1";
  book.add(b, {});
  REQUIRE(book.by_key("k1") == b.id);
  auto c = *book.next(1);
  book.durable(book.report(ok_result(c), 10), 10);
  REQUIRE(book.forget_finished(5) == 0);
  REQUIRE(book.forget_finished(11) == 1);
  REQUIRE_FALSE(book.has(b.id));
  REQUIRE_FALSE(book.by_key("k1"));
}

TEST_CASE("merge_ranges joins neighbouring ok ranges of a batch, never failures",
          "[tasks]") {
  auto a = job_id::generate();
  auto b = job_id::generate();
  std::vector<task_range> rs{{a, 10, 5, true, "", 2}, {b, 0, 3, true, "", 1},
                             {a, 0, 10, true, "", 1}, {a, 15, 1, false, "x", 3},
                             {a, 16, 4, true, "", 3}, {b, 3, 2, true, "", 4}};
  merge_ranges(rs);
  REQUIRE(rs.size() == 4);
  uint64_t total = 0;
  for (auto& r : rs)
    total += r.count;
  REQUIRE(total == 25);
  auto& first_a = a < b ? rs[0] : rs[2];
  REQUIRE(first_a.first == 0);
  REQUIRE(first_a.count == 15);
  REQUIRE(first_a.ended_ms == 2);
}
