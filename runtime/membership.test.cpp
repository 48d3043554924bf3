// SPDX-License-Identifier: Apache-2.0
#include "runtime/membership.hpp"

#include <catch2/catch.hpp>

using namespace monkey;

namespace {

member make(const std::string& node, uint64_t inc, member_state s = member_state::alive) {
  member m;
  m.node = node;
  m.address = "127.0.0.1:" + node;
  m.incarnation = inc;
  m.state = s;
  return m;
}

} // namespace

TEST_CASE("supersedes: higher incarnation, then graver state", "[membership]") {
  CHECK(supersedes(make("a", 2), make("a", 1, member_state::dead)));
  CHECK(supersedes(make("a", 1, member_state::suspect), make("a", 1)));
  CHECK(supersedes(make("a", 1, member_state::dead), make("a", 1, member_state::suspect)));
  CHECK_FALSE(supersedes(make("a", 1), make("a", 1, member_state::suspect)));
  CHECK_FALSE(supersedes(make("a", 1), make("a", 1)));
}

TEST_CASE("updates spread only when they change the view", "[membership]") {
  member_table t(make("self", 1ull << 32));
  CHECK(t.apply(make("b", 5), 100));
  CHECK_FALSE(t.apply(make("b", 5), 101)); // same news
  CHECK(t.apply(make("b", 5, member_state::suspect), 102));
  CHECK(t.find("b")->since_ms == 102);
  CHECK_FALSE(t.apply(make("b", 5), 103)); // alive at the same incarnation does not refute
  CHECK(t.apply(make("b", 6), 104));      // b refuted with a higher incarnation
  CHECK(t.find("b")->state == member_state::alive);
  CHECK(t.apply(make("b", 6, member_state::dead), 105));
  CHECK(t.probe_targets().empty());
  // A restart of b comes with a higher incarnation and brings it back.
  CHECK(t.apply(make("b", 7ull << 32), 106));
  CHECK(t.probe_targets() == std::vector<std::string>{"b"});
  CHECK(t.alive_count() == 2);
}

TEST_CASE("a node refutes rumours of its own suspicion or death", "[membership]") {
  uint64_t inc = 3ull << 32;
  member_table t(make("self", inc));
  t.piggyback(100); // drain the initial announcement
  CHECK(t.apply(make("self", inc, member_state::suspect), 10));
  CHECK(t.self().state == member_state::alive);
  CHECK(t.self().incarnation == inc + 1);
  CHECK(incarnation_text(t.self().incarnation) == "3.1");
  auto out = t.piggyback(10);
  REQUIRE(out.size() == 1);
  CHECK(out[0].node == "self");
  CHECK(out[0].incarnation == inc + 1);
  // A stale rumour (lower incarnation) is ignored.
  CHECK_FALSE(t.apply(make("self", inc, member_state::dead), 11));
  CHECK(t.self().incarnation == inc + 1);
}

TEST_CASE("local suspicion, confirmation and the suspicion timeout", "[membership]") {
  member_table t(make("self", 1));
  t.apply(make("b", 1), 0);
  t.apply(make("c", 1), 0);
  CHECK(t.suspect("b", "ping timed out", 100));
  CHECK_FALSE(t.suspect("b", "again", 150));
  CHECK_FALSE(t.suspect("self", "never", 150));
  CHECK(t.expired_suspects(100).empty());
  CHECK(t.expired_suspects(101) == std::vector<std::string>{"b"});
  CHECK(t.declare_dead("c", "connection refused", 200));
  CHECK_FALSE(t.declare_dead("c", "again", 201));
  CHECK(t.find("c")->reason == "connection refused");
  CHECK(t.probe_targets() == std::vector<std::string>{"b"});
}

TEST_CASE("piggybacked updates are sent a bounded number of times, least-sent first",
          "[membership]") {
  member_table t(make("self", 1));
  for (int i = 0; i < 7; ++i)
    t.apply(make("n" + std::to_string(i), 1), 0);
  // 8 members: each update goes out ceil(3 log2 9) = 10 times.
  size_t total = 0;
  for (int round = 0; round < 100 && t.pending_updates() > 0; ++round)
    total += t.piggyback(3).size();
  CHECK(total == 8 * 10);
  CHECK(t.piggyback(3).empty());
  // A new change jumps the queue.
  t.apply(make("n0", 2), 1);
  auto out = t.piggyback(3);
  REQUIRE(out.size() == 1);
  CHECK(out[0].node == "n0");
}

TEST_CASE("a planned leave is spread and is not a failure", "[membership]") {
  member_table t(make("self", 1));
  t.piggyback(100);
  t.leave(5);
  CHECK(t.self().state == member_state::left);
  auto out = t.piggyback(10);
  REQUIRE(out.size() == 1);
  CHECK(out[0].state == member_state::left);
  member_table other(make("o", 1));
  other.apply(make("self", 1), 0);
  CHECK(other.apply(out[0], 6));
  CHECK(other.find("self")->state == member_state::left);
  CHECK(other.probe_targets().empty());
}

TEST_CASE("the agreed member list shrinks only while a majority of it is alive",
          "[membership]") {
  member_table t(make("a", 1));
  t.apply(make("b", 1), 0);
  t.apply(make("c", 1), 0);
  CHECK(t.agreed().size() == 3);
  CHECK(t.has_majority());
  // One dies: 2 of 3 alive is a majority; once the death has settled it is dropped.
  t.declare_dead("c", "refused", 1000);
  t.refresh_agreed(1000);
  CHECK(t.agreed().size() == 3);
  t.refresh_agreed(6000);
  CHECK(t.agreed().size() == 2);
  CHECK(t.has_majority());
  // Then another: 1 of 2 is no majority, and the list keeps it however long it waits.
  t.declare_dead("b", "refused", 7000);
  t.refresh_agreed(60000);
  CHECK(t.agreed().size() == 2);
  CHECK_FALSE(t.has_majority());
  // It comes back: a majority again.
  t.apply(make("b", 2), 61000);
  CHECK(t.has_majority());
}

TEST_CASE("a minority side never agrees to forget the majority", "[membership]") {
  member_table t(make("a", 1));
  for (auto n : {"b", "c", "d", "e"})
    t.apply(make(n, 1), 0);
  CHECK(t.agreed().size() == 5);
  // Cut off with one other node: 2 of 5, the three declared dead one after the other.
  int64_t now = 1000;
  for (auto n : {"c", "d", "e"}) {
    t.declare_dead(n, "partition", now);
    t.refresh_agreed(now += 300);
  }
  t.refresh_agreed(now + 60000);
  CHECK_FALSE(t.has_majority());
  CHECK(t.agreed().size() == 5);
}

TEST_CASE("a planned leave leaves the agreed list at once: a death and a drain together "
          "keep the majority",
          "[membership]") {
  member_table t(make("a", 1));
  for (auto n : {"b", "c", "d"})
    t.apply(make(n, 1), 0);
  CHECK(t.agreed().size() == 4);
  // One dies, and before its death has settled another is drained (leaves on purpose).
  t.declare_dead("b", "refused", 1000);
  t.apply(make("d", 1, member_state::left), 1500);
  t.refresh_agreed(1600);
  CHECK(t.agreed().size() == 3); // d is gone from the list at once
  CHECK(t.has_majority());       // a and c of a, b, c
  t.refresh_agreed(7000);
  CHECK(t.agreed().size() == 2);
  CHECK(t.has_majority());
}

TEST_CASE("find_members: a name, an id, an address, else a unique id prefix", "[membership]") {
  std::vector<member> ms(3);
  ms[0].node = "aaaa111100000000", ms[0].name = "n1", ms[0].address = "127.0.0.1:4701";
  ms[1].node = "aaaa222200000000", ms[1].name = "n2", ms[1].address = "127.0.0.1:4702";
  ms[2].node = "bbbb333300000000", ms[2].name = "aaaa", ms[2].address = "127.0.0.1:4703";
  auto one = [&](const std::string& t) {
    auto hits = find_members(ms, t);
    return hits.size() == 1 ? hits[0]->node : std::string("x") + std::to_string(hits.size());
  };
  CHECK(one("n2") == "aaaa222200000000");
  CHECK(one("127.0.0.1:4701") == "aaaa111100000000");
  CHECK(one("bbbb333300000000") == "bbbb333300000000");
  CHECK(one("aaaa2") == "aaaa222200000000");
  CHECK(one("aaaa") == "bbbb333300000000"); // a name wins over id prefixes
  CHECK(one("aaa") == "x0");                // too short for a prefix
  CHECK(one("n9") == "x0");
  ms[2].name = "n3";
  CHECK(one("aaaa") == "x2"); // ambiguous prefix
  CHECK(node_label(ms, "aaaa111100000000") == "n1 (aaaa111100000000)");
  CHECK(node_label(ms, "cccc") == "cccc");
  auto dflt = default_node_name("127.0.0.1:4705");
  CHECK(dflt.size() > 5);
  CHECK(dflt.substr(dflt.size() - 5) == ":4705");
}

TEST_CASE("leave_warning: a drain that leaves no majority of the agreed list warns",
          "[membership]") {
  std::vector<member> ms(3);
  for (int i = 0; i < 3; ++i)
    ms[i].node = "n" + std::to_string(i + 1);
  CHECK(leave_warning(ms, 3, {"n3"}).empty());        // 2 of the 2 that stay
  ms[0].state = member_state::dead;                   // dead, not yet off the agreed list
  auto w = leave_warning(ms, 3, {"n3"});              // 1 of 2
  CHECK_THAT(w, Catch::Contains("1 of the 2 agreed members that stay are alive"));
  CHECK(leave_warning(ms, 2, {"n3"}).empty());        // once n1 is off the list: 1 of 1
  ms[0].state = member_state::suspect;
  CHECK_FALSE(leave_warning(ms, 3, {"n3"}).empty());  // suspect is not alive
  CHECK(leave_warning(ms, 3, {}).empty());
  std::vector<member> two(2);
  two[0].node = "a", two[1].node = "b";
  CHECK(leave_warning(two, 2, {"b"}).empty());        // a 2-node cluster: 1 of 1 stays
}
