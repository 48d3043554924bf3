// SPDX-License-Identifier: Apache-2.0
#include "runtime/ids.hpp"

#include <set>

#include <catch2/catch.hpp>

using namespace monkey;

TEST_CASE("job ids print as 26 Crockford characters and parse back", "[runtime][ids]") {
  for (int i = 0; i < 1000; ++i) {
    auto id = job_id::generate();
    auto text = id.str();
    REQUIRE(text.size() == 26);
    auto back = job_id::parse(text);
    REQUIRE(back);
    CHECK(*back == id);
    CHECK(id.short_str() == text.substr(16));
  }
}

TEST_CASE("job ids are unique and sort in creation order", "[runtime][ids]") {
  std::set<std::string> seen;
  job_id prev;
  for (int i = 0; i < 10000; ++i) {
    auto id = job_id::generate();
    CHECK(prev < id);
    CHECK(seen.insert(id.str()).second);
    prev = id;
  }
}

TEST_CASE("malformed job ids are rejected", "[runtime][ids]") {
  CHECK_FALSE(job_id::parse(""));
  CHECK_FALSE(job_id::parse("01ARZ3NDEKTSV4RRFFQ69G5FA"));   // 25 characters
  CHECK_FALSE(job_id::parse("81ARZ3NDEKTSV4RRFFQ69G5FAV"));  // overflows 128 bits
  CHECK_FALSE(job_id::parse("01ARZ3NDEKTSV4RRFFQ69G5FA!"));
  CHECK(job_id::parse("01arz3ndektsv4rrffq69g5fav")); // case-insensitive
}

TEST_CASE("node ids round-trip through hex", "[runtime][ids]") {
  auto n = node_id::generate();
  CHECK(n.value != 0);
  auto back = node_id::parse(n.str());
  REQUIRE(back);
  CHECK(*back == n);
  CHECK_FALSE(node_id::parse("xyz"));
}

TEST_CASE("one resolver for ids: full, unique suffix, ambiguous (listing the matches), too short",
          "[ids]") {
  auto a = *job_id::parse("01ARZ3NDEKTSV4RRFFQ6XYZABC");
  auto b = *job_id::parse("01ARZ3NDEKTSV4RRFFQ7XYZABC");
  auto c = *job_id::parse("01ARZ3NDEKTSV4RRFFQ69G6XYZ");
  auto run = [&](const std::string& text) {
    id_matcher m(text, "job");
    for (auto& id : {a, b, c})
      m.offer(id);
    return m;
  };
  CHECK(run(a.str()).match() == a);
  CHECK(run("69g6xyz").match() == c); // case-insensitive suffix
  auto amb = run("xyzabc");
  CHECK_FALSE(amb.match());
  CHECK(amb.ambiguous());
  CHECK_THAT(amb.problem(), Catch::Contains("ambiguous") && Catch::Contains(a.str())
                              && Catch::Contains(b.str()));
  auto shortie = run("ZABC");
  CHECK(shortie.too_short());
  CHECK_THAT(shortie.problem(), Catch::Contains("at least 6"));
  auto none = run("ZZZZZZZ");
  CHECK_FALSE(none.match());
  CHECK(none.problem() == "no job ZZZZZZZ");
  CHECK(run("01ARZ3NDEKTSV4RRFFQ69G5FAW").problem() == "no job 01ARZ3NDEKTSV4RRFFQ69G5FAW");
}
