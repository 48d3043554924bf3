// SPDX-License-Identifier: Apache-2.0
#include "runtime/process/launcher.hpp"

#include <csignal>
#include <fstream>
#include <future>
#include <sstream>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "runtime/process/proc.hpp"

using namespace monkey;

namespace {

std::string temp_dir() {
  char tmpl[] = "/tmp/monkey-launch-XXXXXX";
  return ::mkdtemp(tmpl);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct run_outcome {
  launch_result spawned;
  exit_info exited;
};

run_outcome run(launcher& l, launch_request req, std::function<void(const launch_result&)> mid = {}) {
  std::promise<launch_result> started;
  std::promise<exit_info> ended;
  l.spawn(
    std::move(req), [&](const launch_result& r) { started.set_value(r); },
    [&](const exit_info& e) { ended.set_value(e); });
  run_outcome out;
  out.spawned = started.get_future().get();
  if (!out.spawned.error.empty())
    return out;
  if (mid)
    mid(out.spawned);
  auto fut = ended.get_future();
  REQUIRE(fut.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  out.exited = fut.get();
  return out;
}

launch_request shell(const std::string& dir, const std::string& script) {
  launch_request req;
  req.argv = {"/bin/sh", "-c", script};
  req.env = {"PATH=/usr/bin:/bin", "GREETING=hi"};
  req.stdout_path = dir + "/out";
  req.stderr_path = dir + "/err";
  return req;
}

} // namespace

TEST_CASE("a child runs with its environment and logs, and its exit code is reaped",
          "[runtime][launcher]") {
  launcher l;
  auto dir = temp_dir();
  auto r = run(l, shell(dir, "echo $GREETING; echo oops >&2; exit 3"));
  REQUIRE(r.spawned.error.empty());
  CHECK(r.spawned.pgid == r.spawned.pid);
  CHECK(r.exited.exit_code == 3);
  CHECK(r.exited.term_signal == 0);
  CHECK(slurp(dir + "/out") == "hi\n");
  CHECK(slurp(dir + "/err") == "oops\n");
}

TEST_CASE("a signalled child reports its signal", "[runtime][launcher]") {
  launcher l;
  auto dir = temp_dir();
  auto r = run(l, shell(dir, "kill -9 $$"));
  CHECK(r.exited.term_signal == SIGKILL);
  CHECK(r.exited.exit_code == -1);
}

TEST_CASE("a missing executable or working directory is a clear error", "[runtime][launcher]") {
  launcher l;
  auto dir = temp_dir();
  launch_request req = shell(dir, "true");
  req.argv = {"no-such-program-xyz"};
  auto r = run(l, req);
  CHECK_THAT(r.spawned.error, Catch::Contains("executable 'no-such-program-xyz' not found"));
  req = shell(dir, "true");
  req.workdir = "/nonexistent/dir";
  r = run(l, req);
  CHECK_THAT(r.spawned.error, Catch::Contains("working directory '/nonexistent/dir'"));
}

TEST_CASE("signal_job stops the whole process group", "[runtime][launcher]") {
  launcher l;
  auto dir = temp_dir();
  // A grandchild in the same group writes its pid, then everything sleeps.
  auto r = run(l, shell(dir, "sleep 60 & echo $! > " + dir + "/grandchild; wait"),
               [&](const launch_result& s) {
                 for (int i = 0; i < 200 && slurp(dir + "/grandchild").empty(); ++i)
                   usleep(10000);
                 CHECK(signal_job(s.cgroup_dir, s.pgid, SIGTERM) >= 1);
               });
  CHECK(r.exited.term_signal == SIGTERM);
  int grandchild = std::stoi(slurp(dir + "/grandchild"));
  for (int i = 0; i < 200 && ::kill(grandchild, 0) == 0; ++i)
    usleep(10000);
  CHECK(::kill(grandchild, 0) != 0);
}

TEST_CASE("many children are reaped independently", "[runtime][launcher]") {
  launcher l;
  auto dir = temp_dir();
  std::atomic<int> done{0};
  std::atomic<int> bad{0};
  for (int i = 0; i < 50; ++i) {
    auto req = shell(dir, "exit " + std::to_string(i % 7));
    l.spawn(
      req, [](const launch_result&) {},
      [&, i](const exit_info& e) {
        if (e.exit_code != i % 7)
          ++bad;
        ++done;
      });
  }
  for (int i = 0; i < 3000 && done < 50; ++i)
    usleep(10000);
  CHECK(done == 50);
  CHECK(bad == 0);
  CHECK(l.running() == 0);
}

TEST_CASE("an exit with no listener is kept for a later adopt", "[runtime][launcher]") {
  launcher l;
  auto dir = temp_dir();
  std::promise<launch_result> started;
  l.spawn(shell(dir, "exit 5"), [&](const launch_result& r) { started.set_value(r); }, nullptr);
  auto s = started.get_future().get();
  for (int i = 0; i < 500 && l.running() > 0; ++i)
    usleep(10000);
  std::promise<exit_info> got;
  CHECK(l.adopt(s.pid, [&](const exit_info& e) { got.set_value(e); }));
  auto fut = got.get_future();
  REQUIRE(fut.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
  CHECK(fut.get().exit_code == 5);
}

TEST_CASE("leftovers of an earlier run are recognised by group and start time",
          "[runtime][launcher]") {
  launcher l;
  auto dir = temp_dir();
  std::promise<launch_result> started;
  l.spawn(shell(dir, "sleep 60"), [&](const launch_result& r) { started.set_value(r); },
          [](const exit_info&) {});
  auto s = started.get_future().get();
  REQUIRE(s.start_ticks > 0);
  CHECK(proc_start_ticks(s.pid) == s.start_ticks);
  CHECK(kill_leftovers(s.cgroup_dir, s.pgid, s.start_ticks) >= 1);
  for (int i = 0; i < 200 && l.running() > 0; ++i)
    usleep(10000);
  CHECK(l.running() == 0);
  // Nothing of the group is left (SIGKILL is delivered asynchronously: allow it a moment).
  for (int i = 0; i < 500 && !pids_in_group(s.pgid, s.start_ticks).empty(); ++i)
    usleep(10000);
  CHECK(pids_in_group(s.pgid, s.start_ticks).empty());
}

TEST_CASE("an executable is looked for in the job's PATH, in order", "[runtime][launcher]") {
  using v = std::vector<std::string>;
  CHECK(exec_candidates("./run.sh", "/opt/bin") == v{"./run.sh"});
  CHECK(exec_candidates("/bin/true", "") == v{"/bin/true"});
  CHECK(exec_candidates("python3", "/opt/bin:/usr/bin") == v{"/opt/bin/python3", "/usr/bin/python3"});
  CHECK(exec_candidates("x", "") == v{"/usr/local/bin/x", "/usr/bin/x", "/bin/x"});
  CHECK(exec_candidates("x", "/a::/b") == v{"/a/x", "./x", "/b/x"});
  CHECK(exec_candidates("x", "/a:") == v{"/a/x", "./x"});
}
