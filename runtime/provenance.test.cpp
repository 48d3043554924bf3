// SPDX-License-Identifier: Apache-2.0
#include "runtime/provenance.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <unistd.h>

using namespace monkey;

namespace {

std::string temp_dir() {
  char tmpl[] = "/tmp/monkey-prov-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  return tmpl;
}

void sh(const std::string& cmd) {
  REQUIRE(std::system(("cd " + cmd + " >/dev/null 2>&1").c_str()) == 0);
}

} // namespace

TEST_CASE("a job's provenance: commit, uncommitted changes and their diff", "[provenance]") {
  if (std::system("git --version >/dev/null 2>&1") != 0) {
    WARN("no git on this machine: skipped");
    return;
  }
  auto dir = temp_dir();
  sh(dir + " && git init -q && git config user.email t@t && git config user.name t"
           " && echo one > a.txt && git add a.txt && git commit -qm one");
  auto clean = collect_provenance(dir, {"sh", "-c", "true"});
  CHECK(clean.at("git_commit").size() == 40);
  CHECK(clean.at("git_dirty") == "no");
  CHECK(clean.count("git_diff") == 0);
  CHECK(clean.at("monkey_version").size() >= 5);
  CHECK(clean.count("python") == 0);
  CHECK(provenance_changes(clean, clean).empty());

  std::ofstream(dir + "/a.txt") << "two\n";
  auto dirty = collect_provenance(dir, {});
  CHECK(dirty.at("git_dirty") == "yes");
  CHECK(dirty.at("git_diff").find("+two") != std::string::npos);
  CHECK(dirty.at("git_diff_sha256") == sha256_hex(dirty.at("git_diff")));
  // The whole diff apart (for the cluster's content-addressed store): the record keeps
  // only its hash, the same hash as above.
  std::string whole;
  auto apart = collect_provenance(dir, {}, &whole);
  CHECK(apart.count("git_diff") == 0);
  CHECK(whole == dirty.at("git_diff"));
  CHECK(apart.at("git_diff_sha256") == sha256_hex(whole));
  CHECK_FALSE(diff_is_stored(apart));
  apart["git_diff_stored"] = "yes";
  CHECK(diff_is_stored(apart));
  auto changes = provenance_changes(clean, dirty);
  REQUIRE(changes.size() == 1);
  CHECK(changes[0] == "code: the working directory has uncommitted changes it did not have");
  CHECK(provenance_changes(dirty, clean).at(0).find("uncommitted changes that are gone") != std::string::npos);

  std::ofstream(dir + "/a.txt") << "three\n";
  auto other = collect_provenance(dir, {});
  CHECK(provenance_changes(dirty, other).at(0).find("code: the uncommitted changes differ") == 0);

  sh(dir + " && git commit -qam three");
  auto moved = collect_provenance(dir, {});
  auto c = provenance_changes(clean, moved);
  REQUIRE_FALSE(c.empty());
  CHECK(c[0].find("code changed: it ran at commit " + clean.at("git_commit").substr(0, 12)) == 0);

  auto gone = collect_provenance("/", {});
  CHECK(provenance_changes(clean, gone).at(0).find("no longer a git tree") != std::string::npos);
  auto v = clean;
  v["monkey_version"] = "0.0.1";
  CHECK(provenance_changes(v, clean).at(0).find("monkey version: 0.0.1 then") == 0);
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("a diff kept in the record is cut at the limit and says so", "[provenance]") {
  provenance_map small, big;
  keep_diff_inline(small, "+x\n");
  CHECK(small.at("git_diff") == "+x\n");
  CHECK(small.count("git_diff_truncated") == 0);
  keep_diff_inline(big, std::string(max_recorded_diff + 10, 'd'));
  CHECK(big.at("git_diff").size() == max_recorded_diff);
  CHECK(big.at("git_diff_truncated") == "yes");
}

TEST_CASE("sha256 of known inputs", "[provenance]") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("a run's recorded shares become the schedule that replays them", "[provenance]") {
  auto point = [](int32_t attempt, int64_t step, int32_t rank, double rows, int64_t ts) {
    metric_point p;
    p.attempt = attempt;
    p.step = step;
    p.rank = rank;
    p.value = rows;
    p.ts_ms = ts;
    p.key = "share";
    return p;
  };
  // Equal at the start, then the devices' speed at step 0 (later), then two rebalances.
  std::vector<metric_point> pts = {
    point(1, 0, 0, 128, 1), point(1, 0, 1, 128, 1), point(1, 0, 1, 85, 5),
    point(1, 0, 0, 171, 5), point(1, 23, 0, 150, 9), point(1, 23, 1, 106, 9),
    point(1, 43, 1, 100, 12), point(1, 43, 0, 156, 12)};
  CHECK(share_schedule_of(pts, 2) == "0:171/85;23:150/106;43:156/100");
  // A retry resumed at step 30 and rebalanced otherwise: its timeline from 30 on.
  auto retried = pts;
  retried.push_back(point(2, 30, 0, 150, 20));
  retried.push_back(point(2, 30, 1, 106, 20));
  retried.push_back(point(2, 50, 0, 140, 25));
  retried.push_back(point(2, 50, 1, 116, 25));
  CHECK(share_schedule_of(retried, 2) == "0:171/85;23:150/106;50:140/116");
  // Equal shares throughout (3 workers, 256 rows: 86/85/85): nothing to replay.
  CHECK(share_schedule_of({point(1, 0, 0, 86, 1), point(1, 0, 1, 85, 1), point(1, 0, 2, 85, 1)},
                          3)
          .empty());
  // A worker never reported: nothing sound to replay.
  CHECK(share_schedule_of({point(1, 0, 0, 200, 1)}, 2).empty());
  CHECK(share_schedule_of({}, 2).empty());
}
