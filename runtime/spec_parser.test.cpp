// SPDX-License-Identifier: Apache-2.0
#include "runtime/spec_parser.hpp"

#include <catch2/catch.hpp>

using namespace monkey;

TEST_CASE("a YAML spec with every field parses", "[runtime][spec]") {
  auto dep = job_id::generate().str();
  auto s = parse_spec_text("name: train\n"
                           "command: [python3, train.py, --lr, '{lr}']\n"
                           "params: {lr: 0.1}\n"
                           "resources: {cpus: 2, gpus: 1, mem: 2G, gpu_mem: 8G, tags: [fast]}\n"
                           "retries: 3\n"
                           "max_requeues: 2\n"
                           "timeout: 10m\n"
                           "time_estimate: 5m\n"
                           "priority: 5\n"
                           "workdir: /tmp\n"
                           "env: {A: b}\n"
                           "seed: 42\n"
                           "tags: [x]\n"
                           "after: [ok:" + dep + "]\n"
                           "array: 0-9\n",
                           "spec.yaml");
  REQUIRE(s);
  CHECK(s->name == "train");
  CHECK(s->command.size() == 4);
  CHECK(s->cpus == 2);
  CHECK(s->gpus == 1);
  CHECK(s->mem_mb == 2048);
  CHECK(s->gpu_mem_mb == 8192);
  CHECK(s->retries == 3);
  CHECK(s->timeout_s == 600);
  CHECK(s->time_estimate_s == 300);
  CHECK(run_bound_s(*s) == 600); // the timeout bounds the attempt; the estimate is a hint
  CHECK(s->seed == 42);
  CHECK(s->has_seed);
  CHECK(s->after.at(0).job.str() == dep);
  CHECK(s->array == "0-9");
}

TEST_CASE("ship and data are spec keys the client acts on", "[runtime][spec]") {
  ship_intent ship;
  auto s = parse_spec_text("command: [a]\nship: true\ndata: [data, /srv/x]\n", "job.yaml", &ship);
  REQUIRE(s);
  CHECK(ship.workdir);
  CHECK(ship.data == std::vector<std::string>{"data", "/srv/x"});
  CHECK(s->ship.empty()); // bundles are described only once they are stored
  ship_intent one;
  REQUIRE(parse_spec_text("command: [a]\ndata: labels.csv\n", "job.yaml", &one));
  CHECK_FALSE(one.workdir);
  CHECK(one.data == std::vector<std::string>{"labels.csv"});
  auto bad = parse_spec_text("command: [a]\nship: yes please\n", "job.yaml");
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error(), Catch::Contains("job.yaml:2:7: ship: expected true or false"));
  auto empty = parse_spec_text("command: [a]\ndata: ['']\n", "job.yaml");
  REQUIRE_FALSE(empty);
  CHECK_THAT(empty.error(), Catch::Contains("data: an empty path"));
}

TEST_CASE("checkpoint_from is a spec key, checked as a job id", "[runtime][spec]") {
  auto id = job_id::generate().str();
  auto s = parse_spec_text("command: [a]\ncheckpoint_from: " + id + "\n", "job.yaml");
  REQUIRE(s);
  CHECK(s->checkpoint_from == id);
  auto bad = parse_spec_text("command: [a]\ncheckpoint_from: nope\n", "job.yaml");
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error(), Catch::Contains("checkpoint_from"));
}

TEST_CASE("a time estimate stands in for a missing timeout in placement, and is checked",
          "[runtime][spec]") {
  auto s = parse_spec_text("command: [a]\ntime_estimate: 90s\n", "job.yaml");
  REQUIRE(s);
  CHECK(s->timeout_s == 0);
  CHECK(run_bound_s(*s) == 90);
  auto bad = parse_spec_text("command: [a]\ntime_estimate: soon\n", "job.yaml");
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error(), Catch::Contains("time_estimate"));
  auto plain = parse_spec_text("command: [a]\n", "job.yaml");
  REQUIRE(plain);
  CHECK(run_bound_s(*plain) == 0);
}

TEST_CASE("JSON specs parse too", "[runtime][spec]") {
  auto s = parse_spec_text(R"({"command": ["/bin/true"], "retries": 1})", "spec.json");
  REQUIRE(s);
  CHECK(s->retries == 1);
}

TEST_CASE("spec errors say file:line:col: field: problem", "[runtime][spec]") {
  auto unknown = parse_spec_text("command: [a]\nretires: 3\n", "job.yaml");
  REQUIRE_FALSE(unknown);
  CHECK_THAT(unknown.error(), Catch::StartsWith("job.yaml:2:1: retires: unknown field"));

  auto wrong_type = parse_spec_text("command: [a]\nretries: many\n", "job.yaml");
  REQUIRE_FALSE(wrong_type);
  CHECK_THAT(wrong_type.error(), Catch::StartsWith("job.yaml:2:10: retries: expected an integer"));

  auto missing = parse_spec_text("name: x\n", "job.yaml");
  REQUIRE_FALSE(missing);
  CHECK_THAT(missing.error(), Catch::Contains("command: missing required field"));

  auto bad_value = parse_spec_text("command: [a]\nresources:\n  cpus: 0\n", "job.yaml");
  REQUIRE_FALSE(bad_value);
  CHECK_THAT(bad_value.error(), Catch::StartsWith("job.yaml:3:9: resources.cpus: must be between"));

  auto syntax = parse_spec_text("command: [a\n", "job.yaml");
  REQUIRE_FALSE(syntax);
  CHECK_THAT(syntax.error(), Catch::StartsWith("job.yaml:"));
  CHECK_THAT(syntax.error(), Catch::Contains("syntax"));

  auto scalar_cmd = parse_spec_text("command: python3 train.py\n", "job.yaml");
  REQUIRE_FALSE(scalar_cmd);
  CHECK_THAT(scalar_cmd.error(), Catch::Contains("command: expected a list"));

  auto bad_mem = parse_spec_text("command: [a]\nresources: {mem: lots}\n", "job.yaml");
  REQUIRE_FALSE(bad_mem);
  CHECK_THAT(bad_mem.error(), Catch::Contains("resources.mem"));
}

TEST_CASE("every mistake of a spec is reported in one run, in order, at its place",
          "[runtime][spec]") {
  auto many = parse_spec_text("retires: 3\nretries: many\nresources:\n  cpus: 0\n  mem: lots\n"
                              "command: [a]\n",
                              "job.yaml");
  REQUIRE_FALSE(many);
  CHECK(many.error()
        == "job.yaml:1:1: retires: unknown field (known: name, command, app, params, resources, "
           "retries, retry_backoff, max_requeues, timeout, time_estimate, priority, workdir, env, "
           "seed, tags, after, array, workers, checkpoint_from, ship, data)\n"
           "job.yaml:2:10: retries: expected an integer, got 'many'\n"
           "job.yaml:4:9: resources.cpus: must be between 1 and 4096, got 0\n"
           "job.yaml:5:8: resources.mem: " + parse_memory_mb("lots").error() + "\n"
           "4 problems");
  // A field that is there but wrong is not also "missing".
  auto wrong_cmd = parse_spec_text("command: python3 train.py\n", "job.yaml");
  REQUIRE_FALSE(wrong_cmd);
  CHECK(wrong_cmd.error().find("missing") == std::string::npos);
  // The rules between fields are reported at the field they name, not at 1:1.
  auto rule = parse_spec_text("command: [a]\nresources: {gpu_mem: 2G}\n", "job.yaml");
  REQUIRE_FALSE(rule);
  CHECK_THAT(rule.error(),
             Catch::StartsWith("job.yaml:2:22: resources.gpu_mem: set, but the job asks for no gpus"));
  auto both = parse_spec_text("command: [a]\napp: hello\n", "job.yaml");
  REQUIRE_FALSE(both);
  CHECK_THAT(both.error(), Catch::StartsWith("job.yaml:2:6: app: a job runs either"));
}

TEST_CASE("a missing spec file is a clear error", "[runtime][spec]") {
  auto s = parse_spec_file("/nonexistent/spec.yaml");
  REQUIRE_FALSE(s);
  CHECK_THAT(s.error(), Catch::Contains("cannot open"));
}

TEST_CASE("memory sizes and durations parse with units", "[runtime][spec]") {
  CHECK(*parse_memory_mb("512") == 512);
  CHECK(*parse_memory_mb("4G") == 4096);
  CHECK(*parse_memory_mb("1.5G") == 1536);
  CHECK_FALSE(parse_memory_mb("4X"));
  CHECK_FALSE(parse_memory_mb("-1G"));
  CHECK(*parse_duration_s("90") == 90);
  CHECK(*parse_duration_s("2h") == 7200);
  CHECK(*parse_duration_s("500ms") == Approx(0.5));
  CHECK_FALSE(parse_duration_s("soon"));
}

TEST_CASE("dependencies need a kind and a full id", "[runtime][spec]") {
  auto id = job_id::generate().str();
  CHECK(parse_dependency("ok:" + id)->kind == "ok");
  CHECK(parse_dependency("any:" + id)->kind == "any");
  CHECK(parse_dependency(id)->kind == "ok");
  CHECK_FALSE(parse_dependency("maybe:" + id));
  CHECK_FALSE(parse_dependency("ok:ABC"));
}

// Found by fuzzing (tests/fuzz/corpus/spec_parser/crash-command-scalar): a field's value was
// bound by reference to yaml-cpp's iterator proxy, which dies with the expression (ASan:
// stack-use-after-scope in YAML::Node::Type). Run under scripts/sanitize to see it fail.
TEST_CASE("field values stay valid while a spec is read (fuzz finding)", "[runtime][spec]") {
  auto scalar_cmd = parse_spec_text("command: echo hi\n", "fuzz");
  REQUIRE_FALSE(scalar_cmd);
  CHECK_THAT(scalar_cmd.error(), Catch::Contains("command: expected a list of arguments"));
  auto ok = parse_spec_text("command: [a]\nresources: {cpus: 2, mem: 1G, tags: [x]}\n", "fuzz");
  REQUIRE(ok);
  CHECK(ok->cpus == 2);
  CHECK(ok->tags == std::vector<std::string>{"x"});
}

TEST_CASE("retry backoffs: FIRST..MOST, FIRST alone, 0, bad ones named", "[runtime][spec]") {
  auto b = parse_backoff("1s..1m");
  REQUIRE(b);
  CHECK(b->first == 1);
  CHECK(b->second == 60);
  CHECK(parse_backoff("5s")->second == 60);
  CHECK(parse_backoff("2m")->second == 120);
  CHECK(parse_backoff("0")->first == 0);
  CHECK_FALSE(parse_backoff("1m..1s"));
  auto bad = parse_backoff("fast");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().find("1s..1m") != std::string::npos);
  auto spec = parse_spec_text("command: [true]\nretries: 2\nretry_backoff: 3s..10s\n", "x.yaml");
  REQUIRE(spec);
  CHECK(spec->retry_backoff_s == 3);
  CHECK(spec->retry_backoff_max_s == 10);
  auto wrong = parse_spec_text("command: [true]\nretry_backoff: soon\n", "x.yaml");
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().find("retry_backoff") != std::string::npos);
}
