// SPDX-License-Identifier: Apache-2.0
#include "runtime/process/gang.hpp"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "runtime/job.hpp"

using namespace monkey;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string scratch() {
  char dir[] = "/tmp/monkey-gang-XXXXXX";
  REQUIRE(::mkdtemp(dir));
  return dir;
}

} // namespace

TEST_CASE("a rank's metric lines get its rank", "[runtime][gang]") {
  std::string out;
  REQUIRE(tag_metric_line("MONKEY_METRIC step=3 loss=0.5", 2, out));
  CHECK(out == "MONKEY_METRIC rank=2 step=3 loss=0.5");
  std::vector<std::pair<std::string, double>> kv;
  REQUIRE(parse_metric_line(out, kv));
  CHECK(kv.front() == std::make_pair(std::string("rank"), 2.0));
  REQUIRE(tag_metric_line("MONKEY_METRIC rank=5 loss=1", 2, out));
  CHECK(out == "MONKEY_METRIC rank=5 loss=1"); // the script named its rank itself
  CHECK_FALSE(tag_metric_line("epoch 3 done", 2, out));
}

TEST_CASE("a gang runs N ranks with torchrun's variables, each with its own log",
          "[runtime][gang]") {
  auto dir = scratch();
  ::setenv("MONKEY_RANK_LOGS", (dir + "/1.out").c_str(), 1);
  int rc = run_gang({"3", "--", "sh", "-c",
                     "echo rank=$RANK local=$LOCAL_RANK world=$WORLD_SIZE "
                     "lws=$LOCAL_WORLD_SIZE addr=$MASTER_ADDR port=$MASTER_PORT"});
  CHECK(rc == 0);
  for (int r = 0; r < 3; ++r) {
    auto log = slurp(rank_log_path(dir + "/1.out", r));
    CHECK_THAT(log, Catch::Contains("rank=" + std::to_string(r) + " local=" + std::to_string(r)
                                    + " world=3 lws=3 addr=127.0.0.1 port="));
  }
  ::unsetenv("MONKEY_RANK_LOGS");
}

TEST_CASE("a failing rank stops the others and the gang exits with its status",
          "[runtime][gang]") {
  ::setenv("MONKEY_KILL_GRACE_MS", "2000", 1);
  auto t0 = std::chrono::steady_clock::now();
  int rc = run_gang({"3", "--", "sh", "-c", "if [ $RANK = 1 ]; then exit 7; fi; exec sleep 60"});
  auto took = std::chrono::steady_clock::now() - t0;
  CHECK(rc == 7);
  CHECK(took < std::chrono::seconds(50)); // the sleeping ranks were stopped, not waited for
  CHECK(run_gang({"2", "--", "/nonexistent/program"}) == 127);
  CHECK(run_gang({"0", "--", "true"}) == 2);
  CHECK(run_gang({"2", "true"}) == 2);
  ::unsetenv("MONKEY_KILL_GRACE_MS");
}
