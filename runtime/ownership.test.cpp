// SPDX-License-Identifier: Apache-2.0
#include "runtime/ownership.hpp"

#include <map>

#include <catch2/catch.hpp>

using namespace monkey;

TEST_CASE("rendezvous ranking is the same everywhere and spreads keys", "[ownership]") {
  std::vector<std::string> nodes{"a1", "b2", "c3", "d4"};
  std::map<std::string, int> firsts;
  for (int i = 0; i < 4000; ++i) {
    auto key = "job-" + std::to_string(i);
    auto r1 = rendezvous_rank(key, nodes);
    auto r2 = rendezvous_rank(key, {"d4", "c3", "b2", "a1"}); // order of input is irrelevant
    REQUIRE(r1 == r2);
    firsts[r1.front()] += 1;
  }
  for (auto& [node, n] : firsts)
    CHECK(n > 800); // ~1000 each
}

TEST_CASE("losing a member moves only the keys it owned", "[ownership]") {
  std::vector<std::string> all{"a", "b", "c", "d", "e"};
  std::vector<std::string> without_c{"a", "b", "d", "e"};
  int moved = 0;
  for (int i = 0; i < 2000; ++i) {
    auto key = std::to_string(i);
    auto before = rendezvous_rank(key, all).front();
    auto after = rendezvous_rank(key, without_c).front();
    if (before != "c")
      REQUIRE(before == after);
    else
      ++moved;
    // The successor among the survivors is the next in the full ranking.
    if (before == "c")
      REQUIRE(after == rendezvous_rank(key, all)[1]);
  }
  CHECK(moved > 250);
}

TEST_CASE("holders: the owner can run the job, the replicas follow the ranking",
          "[ownership]") {
  std::vector<holder_candidate> alive{{"cpu1", 4, 0}, {"cpu2", 4, 0}, {"gpu1", 8, 2}};
  for (int i = 0; i < 200; ++i) {
    auto key = "k" + std::to_string(i);
    auto h = choose_holders(key, 1, 1, alive, 2);
    REQUIRE(h);
    CHECK(h->owner == "gpu1"); // the only member with a GPU
    REQUIRE(h->replicas.size() == 2);
    CHECK(h->replicas[0] == "gpu1");
    CHECK(h->replicas[1] != "gpu1");
    auto any = choose_holders(key, 1, 0, alive, 5);
    REQUIRE(any);
    CHECK(any->replicas.size() == 3); // no more holders than members
  }
  auto none = choose_holders("x", 1, 4, alive, 2);
  REQUIRE_FALSE(none);
  CHECK(none.error() == "needs 4 gpus; no alive member has more than 2");
  CHECK_FALSE(choose_holders("x", 1, 0, {}, 2));
  CHECK(successor("k", {}).empty());
  CHECK(successor("k", {"z"}) == "z");
}

TEST_CASE("holders_for: first, then the alive current holders, then by rank, never excluded",
          "[ownership]") {
  std::vector<std::string> alive{"a", "b", "c", "d"};
  // A submit: the owner first, then the others by rank of the key.
  auto h = holders_for("key", {"a"}, {}, alive, 2);
  REQUIRE(h.size() == 2);
  CHECK(h[0] == "a");
  std::vector<std::string> others{"b", "c", "d"};
  CHECK(h[1] == rendezvous_rank("key", others).front());
  // Re-replication: a dead holder ("x") is replaced, the live one ("c") stays.
  auto r = holders_for("job", {"a"}, {"a", "x", "c"}, alive, 3);
  CHECK(r == std::vector<std::string>{"a", "c", rendezvous_rank("job", {"b", "d"}).front()});
  // A hand-over: the heir first, the leaving node excluded even when it is alive.
  auto d = holders_for("job", {"b"}, {"a", "b"}, alive, 2, {"a"});
  REQUIRE(d.size() == 2);
  CHECK(d[0] == "b");
  CHECK(d[1] != "a");
  // Fewer alive than R: as many as there are.
  CHECK(holders_for("k", {"a"}, {}, {"a"}, 3) == std::vector<std::string>{"a"});
}
