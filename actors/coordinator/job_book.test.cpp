// SPDX-License-Identifier: Apache-2.0
#include "actors/coordinator/job_book.hpp"

#include <catch2/catch.hpp>

#include "runtime/sweep/sweep_spec.hpp"

using namespace monkey;

namespace {

job_record queued(uint64_t seq, std::string key = {}) {
  job_record r;
  r.id = job_id::generate();
  r.owner = node_id{1};
  r.submit_seq = seq;
  r.client_key = std::move(key);
  r.spec.command = {"true"};
  touch(r, job_state::queued, "submitted", 1);
  return r;
}

attempt_end ended(const char* outcome, const char* cause) {
  return attempt_end{outcome, cause, exit_info{}};
}

} // namespace

TEST_CASE("the book moves a record between owned, held and unsynced, and queues only owned "
          "queued jobs",
          "[coordinator][job_book]") {
  job_book book;
  auto a = queued(5, "k1"), b = queued(3, "k1"), c = queued(9);
  book.own(a);
  book.own(b);
  book.own(c);
  REQUIRE(book.queue().size() == 3);
  CHECK(book.queue().begin()->second == b.id); // first come, first served
  CHECK(book.by_key("k1").size() == 2);
  // Held: no longer owned nor queued, still found, key still known (a retried submit).
  book.hold(a, false);
  CHECK_FALSE(book.owns(a.id));
  CHECK(book.queue().size() == 2);
  REQUIRE(book.held(a.id));
  CHECK_FALSE(book.held(a.id)->confirmed);
  book.confirm(a.id);
  CHECK(book.held(a.id)->confirmed);
  CHECK(book.by_key("k1").size() == 2);
  // Parked after a fence: found by find(), not owned, not queued.
  book.park(*book.owned(c.id));
  CHECK(book.find(c.id));
  CHECK_FALSE(book.owns(c.id));
  CHECK(book.queue().size() == 1);
  auto back = book.unpark(c.id);
  REQUIRE(back);
  book.own(*back);
  CHECK(book.queue().size() == 2);
  // A running job leaves the queue.
  auto* rb = book.owned(b.id);
  begin_attempt(*rb, attempt_id{node_id{1}, 1, 1}, 10, "/tmp/x", {});
  book.requeue_if_queued(b.id);
  CHECK(book.queue().size() == 1);
  book.erase(a.id);
  CHECK_FALSE(book.find(a.id));
  CHECK(book.by_key("k1").size() == 1);
  CHECK(book.next_seq() == 10); // past every submit_seq seen
  // One resolver over every record.
  CHECK(book.match(b.id.short_str()).match() == b.id);
  CHECK_FALSE(book.match("ZZZZZZZZ").match());
}

TEST_CASE("an attempt's end: retries are charged, requeues are not, a repeat changes nothing",
          "[coordinator][job_book]") {
  auto r = queued(1);
  r.spec.retries = 1;
  begin_attempt(r, attempt_id{node_id{1}, 1, 1}, 10, "/logs", {0});
  CHECK(r.state == job_state::running);
  CHECK(r.attempts.back().log_out == "/logs/1.out");
  auto v = r.version;
  REQUIRE(end_attempt(r, 1, ended("failed", "exit 1"), 20));
  CHECK(r.state == job_state::queued);
  CHECK(r.retries_used == 1);
  CHECK(r.reason == "attempt 1: exit 1; retry 1 of 1 after a backoff of 1 s");
  CHECK(r.not_before_ms == 20 + 1000); // the default backoff: 1 s first
  CHECK(r.version == v + 1);
  // Delivered twice: nothing changes (idempotent).
  CHECK_FALSE(end_attempt(r, 1, ended("failed", "exit 1"), 21));
  CHECK(r.version == v + 1);
  begin_attempt(r, attempt_id{node_id{1}, 1, 2}, 30, "/logs", {});
  REQUIRE(end_attempt(r, 2, ended("requeued", "stopped by a shutdown"), 40));
  CHECK(r.state == job_state::queued);
  CHECK(r.retries_used == 1);
  begin_attempt(r, attempt_id{node_id{1}, 1, 3}, 50, "/logs", {});
  // A stale end of an older attempt changes nothing.
  CHECK_FALSE(end_attempt(r, 2, ended("succeeded", "exit 0"), 55));
  REQUIRE(end_attempt(r, 3, ended("timeout", "timed out after 1 s"), 60));
  CHECK(r.state == job_state::timed_out);
  CHECK(is_final(r.state));
}

TEST_CASE("a sweep driver that ends with sweep_failed_exit fails at once, another exit retries",
          "[coordinator][job_book]") {
  auto r = queued(1);
  r.spec.driver = true;
  r.spec.retries = 20;
  begin_attempt(r, attempt_id{node_id{1}, 1, 1}, 10, "/logs", {});
  auto failed = ended("failed", "exit 75");
  failed.exit.exit_code = 75; // lost its verbs: the next attempt goes on
  REQUIRE(end_attempt(r, 1, failed, 20));
  CHECK(r.state == job_state::queued);
  CHECK(r.retries_used == 1);
  begin_attempt(r, attempt_id{node_id{1}, 1, 2}, 30, "/logs", {});
  auto gave_up = ended("failed", "exit 65");
  gave_up.exit.exit_code = sweep::sweep_failed_exit;
  REQUIRE(end_attempt(r, 2, gave_up, 40));
  CHECK(r.state == job_state::failed);
  CHECK(r.retries_used == 1);
  // Only a driver: the same exit code of an ordinary job is retried.
  auto j = queued(2);
  j.spec.retries = 1;
  begin_attempt(j, attempt_id{node_id{1}, 1, 3}, 10, "/logs", {});
  REQUIRE(end_attempt(j, 1, gave_up, 20));
  CHECK(j.state == job_state::queued);
}

TEST_CASE("a lost attempt is requeued from --max-requeues, then the job is lost",
          "[coordinator][job_book]") {
  auto r = queued(1);
  r.spec.max_requeues = 1;
  begin_attempt(r, attempt_id{node_id{1}, 1, 1}, 10, "/logs", {});
  mark_lost(r, "owner X died while attempt 1 ran", 20);
  CHECK(r.state == job_state::queued);
  CHECK(r.attempts.back().outcome == "lost");
  CHECK(r.requeues_used == 1);
  begin_attempt(r, attempt_id{node_id{1}, 1, 2}, 30, "/logs", {});
  mark_lost(r, "attempt 2 was stopped when this node was fenced (declared dead)", 40);
  CHECK(r.state == job_state::lost);
  CHECK_THAT(r.reason, Catch::Contains("fenced") && Catch::Contains("no requeues left"));
}

TEST_CASE("dependencies: met, waiting, never, or to be asked of the cluster",
          "[coordinator][job_book]") {
  auto ok_dep = job_id::generate(), any_dep = job_id::generate(), far = job_id::generate();
  auto r = queued(1);
  r.spec.after = {{"ok", ok_dep}, {"any", any_dep}};
  std::map<job_id, job_state> known{{ok_dep, job_state::running},
                                    {any_dep, job_state::failed}};
  auto state_of = [&](const job_id& id) -> std::optional<job_state> {
    auto it = known.find(id);
    return it == known.end() ? std::nullopt : std::optional<job_state>(it->second);
  };
  auto c = check_dependencies(r, state_of);
  CHECK(c.kind == dependency_check::waiting);
  CHECK_THAT(c.text, Catch::Contains(ok_dep.short_str()));
  known[ok_dep] = job_state::succeeded;
  CHECK(check_dependencies(r, state_of).kind == dependency_check::met);
  known[ok_dep] = job_state::cancelled;
  c = check_dependencies(r, state_of);
  CHECK(c.kind == dependency_check::never);
  CHECK_THAT(c.text, Catch::Contains("can never be met"));
  // A dependency owned elsewhere and not known here is asked of the other members.
  r.spec.after.push_back({"ok", far});
  known[ok_dep] = job_state::succeeded;
  c = check_dependencies(r, state_of);
  CHECK(c.kind == dependency_check::unknown);
  CHECK(c.ask == std::vector<job_id>{far});
}

TEST_CASE("retries wait a doubling backoff, bounded, or none", "[coordinator][job_book]") {
  auto r = queued(1);
  r.spec.retries = 4;
  r.spec.retry_backoff_s = 2;
  r.spec.retry_backoff_max_s = 5;
  int64_t t = 100;
  std::vector<int64_t> waits;
  for (int32_t n = 1; n <= 4; ++n) {
    begin_attempt(r, attempt_id{node_id{1}, 1, static_cast<uint64_t>(n)}, t, "/logs", {});
    t += 10;
    REQUIRE(end_attempt(r, n, ended("failed", "exit 1"), t));
    waits.push_back(r.not_before_ms - t);
  }
  CHECK(waits == std::vector<int64_t>{2000, 4000, 5000, 5000});
  auto now = queued(2);
  now.spec.retries = 1;
  now.spec.retry_backoff_s = 0;
  begin_attempt(now, attempt_id{node_id{1}, 1, 9}, 10, "/logs", {});
  REQUIRE(end_attempt(now, 1, ended("failed", "exit 1"), 20));
  CHECK(now.not_before_ms == 20);
  CHECK(now.reason == "attempt 1: exit 1; retry 1 of 1");
}
