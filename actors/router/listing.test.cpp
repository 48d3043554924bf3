// SPDX-License-Identifier: Apache-2.0
#include "actors/router/listing.hpp"

#include <catch2/catch.hpp>

using namespace monkey;

namespace {

job_summary row(job_id id, uint64_t version, job_state state, std::vector<std::string> holders) {
  job_summary s;
  s.id = id;
  s.version = version;
  s.state = state;
  s.final = is_final(state);
  s.holders = std::move(holders);
  s.owner = s.holders.empty() ? "" : s.holders.front();
  s.submitted_ms = 1000;
  s.updated_ms = 1000;
  s.reason = "x";
  return s;
}

} // namespace

TEST_CASE("a listing keeps per job the row that stands, and says what it cannot see",
          "[router][listing]") {
  auto a = job_id::generate(), b = job_id::generate(), c = job_id::generate();
  std::map<job_id, job_summary> merged;
  merge_rows(merged, {row(a, 3, job_state::running, {"n1", "n2"})});
  merge_rows(merged, {row(a, 1u << 20, job_state::queued, {"n2", "n3"}), // adopted
                      row(b, 5, job_state::succeeded, {"n3", "n4"})});
  merge_rows(merged, {row(b, 1u << 20, job_state::running, {"n4"})}); // final stands
  CHECK(merged[a].version == (1u << 20));
  CHECK(merged[b].state == job_state::succeeded);
  std::map<job_id, job_summary> seen;
  auto states = [](const std::string& n) {
    return n == "n5" || n == "n6" ? member_state::dead
           : n == "n7"            ? member_state::suspect
                                  : member_state::alive;
  };
  remember_and_mark(seen, merged, false, "n1", states, 2000, 100);
  CHECK(seen.size() == 2);
  // Later: c was listed once (held by n5 and n6, now dead), a's holders did not answer.
  seen[c] = row(c, 2, job_state::queued, {"n5", "n6"});
  seen[a].holders = {"n7"};
  std::map<job_id, job_summary> later;
  merge_rows(later, {row(b, 5, job_state::succeeded, {"n3", "n4"})});
  remember_and_mark(seen, later, false, "n1", states, 3000, 100);
  REQUIRE(later.count(c));
  CHECK(later[c].unavailable);
  CHECK_THAT(later[c].reason, Catch::Contains("unavailable") && Catch::Contains("n5"));
  REQUIRE(later.count(a));
  CHECK_FALSE(later[a].unavailable);
  CHECK_THAT(later[a].reason, Catch::StartsWith("last known"));
  // A stray copy answered by a node it does not name (a former owner that gave the job up):
  // its named holders are dead, so it is unavailable, not queued; a final one stands.
  auto d = job_id::generate(), e = job_id::generate();
  std::map<job_id, job_summary> stray;
  merge_rows(stray, {row(d, 7, job_state::queued, {"n5", "n6"}),
                     row(e, 7, job_state::failed, {"n5", "n6"})});
  remember_and_mark(seen, stray, false, "n1", states, 3000, 100);
  CHECK(stray[d].unavailable);
  CHECK_THAT(stray[d].reason, Catch::Contains("n5") && Catch::Contains("n6"));
  CHECK_FALSE(stray[e].unavailable);
  CHECK_FALSE(seen[d].unavailable); // remembered as answered
  // A filtered listing adds no remembered rows.
  std::map<job_id, job_summary> filtered;
  remember_and_mark(seen, filtered, true, "n1", states, 3000, 100);
  CHECK(filtered.empty());
  // Bounded: the oldest are forgotten first.
  for (int i = 0; i < 10; ++i) {
    auto id = job_id::generate();
    auto s = row(id, 1, job_state::queued, {"n1"});
    s.submitted_ms = 5000 + i;
    seen[id] = s;
  }
  std::map<job_id, job_summary> none;
  remember_and_mark(seen, none, true, "n1", states, 6000, 5);
  CHECK(seen.size() == 5);
  for (auto& [id, s] : seen)
    CHECK(s.submitted_ms >= 5005);
  auto list = finish_list(later, 1);
  REQUIRE(list.jobs.size() == 1);
}

TEST_CASE("a merged row keeps the metrics of the node that reported them and the largest point "
          "count per key",
          "[router][listing]") {
  auto a = job_id::generate();
  auto standing = row(a, 9, job_state::running, {"n1", "n2"});
  auto ran = row(a, 4, job_state::running, {"n1", "n2"}); // an older copy, on the node that ran it
  ran.metrics = {{"loss", 0.5}, {"acc", 0.8}};
  ran.metric_counts = {{"loss", 12}, {"acc", 3}};
  auto older = row(a, 2, job_state::running, {"n3"}); // a node that ran an earlier attempt
  older.metrics = {{"loss", 0.9}};
  older.metric_counts = {{"loss", 20}};
  std::map<job_id, job_summary> merged;
  merge_rows(merged, {older});
  merge_rows(merged, {standing});
  merge_rows(merged, {ran});
  CHECK(merged[a].version == 9); // the standing copy's record
  CHECK(merged[a].metrics.at("loss") == 0.5);
  // Counts only move the sweep driver to read again: the largest one changes whenever the
  // series the driver reads (the latest attempt's node's) can have changed.
  CHECK(merged[a].metric_counts.at("loss") == 20);
  CHECK(merged[a].metric_counts.at("acc") == 3);
}
