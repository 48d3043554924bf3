// SPDX-License-Identifier: Apache-2.0
#include "actors/coordinator/launch_env.hpp"

#include <algorithm>

#include <catch2/catch.hpp>

using namespace monkey;

TEST_CASE("an attempt's launch: placeholders filled, MONKEY_* set, logs and cgroup named",
          "[coordinator][launch_env]") {
  job_record rec;
  rec.id = job_id::generate();
  rec.spec.command = {"train", "--lr", "{lr}"};
  rec.spec.params = {{"lr", "0.1"}};
  rec.spec.env = {{"FOO", "bar"}, {"PATH", "/custom"}};
  rec.spec.cpus = 3;
  rec.spec.seed = 42;
  rec.spec.array_index = 7;
  attempt_record at;
  at.id = attempt_id{node_id{0xab}, 2, 9};
  at.number = 4;
  at.log_out = "/d/logs/x/4.out";
  at.log_err = "/d/logs/x/4.err";
  auto req = launch_for(rec, at, {1, 3}, node_id{0xab}, "/sys/fs/cgroup",
                        {{"PATH", "/usr/bin"}, {"HOME", "/root"}});
  CHECK(req.argv == std::vector<std::string>{"train", "--lr", "0.1"});
  auto has = [&](const std::string& kv) {
    return std::find(req.env.begin(), req.env.end(), kv) != req.env.end();
  };
  CHECK(has("PATH=/custom")); // the spec's env over the runtime's
  CHECK(has("HOME=/root"));
  CHECK(has("FOO=bar"));
  CHECK(has("MONKEY_JOB_ID=" + rec.id.str()));
  CHECK(has("MONKEY_ATTEMPT=4"));
  CHECK(has("MONKEY_ATTEMPT_ID=" + at.id.str()));
  CHECK(has("MONKEY_SEED=42"));
  CHECK(has("MONKEY_PARAM_LR=0.1"));
  CHECK(has("MONKEY_ARRAY_INDEX=7"));
  CHECK(has("CUDA_VISIBLE_DEVICES=1,3"));
  CHECK(has("OMP_NUM_THREADS=3"));
  CHECK(req.stdout_path == at.log_out);
  CHECK(req.cgroup_dir == "/sys/fs/cgroup/monkey-" + node_id{0xab}.str() + "/"
                            + rec.id.short_str() + "-4");
  CHECK(launch_for(rec, at, {}, node_id{1}, "").cgroup_dir.empty());
}

TEST_CASE("an app attempt starts the app's host with its ranks, its node and its key",
          "[coordinator][launch_env]") {
  job_record rec;
  rec.id = job_id::generate();
  rec.spec.app = "hello";
  rec.spec.workers = 4;
  rec.spec.params = {{"steps", "5"}};
  attempt_record at;
  at.id = attempt_id{node_id{0xab}, 2, 9};
  at.number = 1;
  at.log_out = "/d/logs/x/1.out";
  auto req = launch_for(rec, at, {}, node_id{0xab}, "", {{"MONKEY_APP_KEY", "stale"}});
  app_host_launch h;
  h.executable = "/opt/monkey/bin/monkey-app-hello";
  h.node_address = "127.0.0.1:4700";
  h.attempt_key = "abcd";
  h.ranks = {0, 1, 2, 3};
  h.env = {{"MONKEY_HEARTBEAT_MS", "250"}};
  add_app_host(req, rec, at, h);
  CHECK(req.argv == std::vector<std::string>{"/opt/monkey/bin/monkey-app-hello", "--host"});
  auto count = [&](const std::string& prefix) {
    return std::count_if(req.env.begin(), req.env.end(),
                         [&](const std::string& kv) { return kv.rfind(prefix, 0) == 0; });
  };
  auto has = [&](const std::string& kv) {
    return std::find(req.env.begin(), req.env.end(), kv) != req.env.end();
  };
  CHECK(has("MONKEY_APP=hello"));
  CHECK(has("MONKEY_APP_RANKS=0-3"));
  CHECK(has("MONKEY_WORLD_SIZE=4"));
  CHECK(has("MONKEY_NODE_ADDRESS=127.0.0.1:4700"));
  CHECK(has("MONKEY_APP_KEY=abcd"));
  CHECK(count("MONKEY_APP_KEY=") == 1);
  CHECK(has("MONKEY_RANK_LOGS=/d/logs/x/1.out"));
  CHECK(has("MONKEY_HEARTBEAT_MS=250"));
  CHECK(has("MONKEY_PARAM_STEPS=5"));
  // A node without the app names it: the launcher's error then says what is missing.
  h.executable.clear();
  add_app_host(req, rec, at, h);
  CHECK(req.argv.front() == "monkey-app-hello");
}

TEST_CASE("an app's world counts its extra ranks, MONKEY_GFLOPS is the worker's device's "
          "speed", "[coordinator][launch_env]") {
  job_record rec;
  rec.id = job_id::generate();
  rec.spec.app = "fmnist";
  rec.spec.workers = 2;
  rec.spec.extra_ranks = 3;
  rec.spec.cpus = 2;
  attempt_record at;
  at.number = 1;
  auto req = launch_for(rec, at, {}, node_id{0xab}, "", {});
  app_host_launch h;
  h.ranks = {0, 1, 2, 3, 4};
  add_app_host(req, rec, at, h);
  auto has = [&](const launch_request& r, const std::string& kv) {
    return std::find(r.env.begin(), r.env.end(), kv) != r.env.end();
  };
  CHECK(has(req, "MONKEY_WORLD_SIZE=5"));
  CHECK(workers_text(rec.spec) == "2 workers + 3 more ranks");
  std::vector<devices::device_info> devs(2);
  devs[0].kind = "cpu", devs[0].slots = 8, devs[0].gflops = 80;
  devs[1].kind = "cuda", devs[1].index = 1, devs[1].gflops = 9000;
  auto cpu = launch_for(rec, at, {}, node_id{0xab}, "", {});
  add_device_speed(cpu, devs, rec.spec, {});
  CHECK(has(cpu, "MONKEY_GFLOPS=" + std::to_string(20.0))); // 2 of 8 cores
  auto gpu = launch_for(rec, at, {1}, node_id{0xab}, "", {});
  add_device_speed(gpu, devs, rec.spec, {1});
  CHECK(has(gpu, "MONKEY_GFLOPS=" + std::to_string(9000.0)));
  devs[0].gflops = 0; // not measured: no figure
  auto none = launch_for(rec, at, {}, node_id{0xab}, "", {});
  add_device_speed(none, devs, rec.spec, {});
  CHECK(std::none_of(none.env.begin(), none.env.end(),
                     [](const std::string& kv) { return kv.rfind("MONKEY_GFLOPS=", 0) == 0; }));
}

TEST_CASE("the Python helper's directory goes on PYTHONPATH, after the job's own",
          "[coordinator][launch_env]") {
  job_record rec;
  rec.id = job_id::generate();
  rec.spec.command = {"python3", "train.py"};
  attempt_record at;
  at.number = 1;
  auto has = [](const launch_request& r, const std::string& kv) {
    return std::find(r.env.begin(), r.env.end(), kv) != r.env.end();
  };
  CHECK(has(launch_for(rec, at, {}, node_id{1}, "", {}, "/opt/monkey/python"),
            "PYTHONPATH=/opt/monkey/python"));
  CHECK(has(launch_for(rec, at, {}, node_id{1}, "", {{"PYTHONPATH", "/site"}}, "/opt/py"),
            "PYTHONPATH=/site:/opt/py"));
  rec.spec.env = {{"PYTHONPATH", "/mine"}};
  CHECK(has(launch_for(rec, at, {}, node_id{1}, "", {{"PYTHONPATH", "/site"}}, "/opt/py"),
            "PYTHONPATH=/mine:/opt/py"));
  auto none = launch_for(rec, at, {}, node_id{1}, "", {}, "");
  CHECK(has(none, "PYTHONPATH=/mine"));
  // This build's own: next to the binaries (build/python).
  CHECK_FALSE(python_helper_dir().empty());
}
