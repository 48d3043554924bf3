// SPDX-License-Identifier: Apache-2.0
#include "runtime/job.hpp"

#include <catch2/catch.hpp>

using namespace monkey;

namespace {

job_spec command_spec() {
  job_spec s;
  s.command = {"/bin/echo", "hello"};
  return s;
}

} // namespace

TEST_CASE("a job record survives a msgpack round trip", "[runtime][job]") {
  job_record rec;
  rec.id = job_id::generate();
  rec.spec = command_spec();
  rec.spec.params["lr"] = "0.1";
  rec.spec.after.push_back({"ok", job_id::generate()});
  rec.state = job_state::timed_out;
  rec.version = 7;
  rec.owner = node_id::generate();
  attempt_record at;
  at.id = {rec.owner, 3, 42};
  at.number = 1;
  at.cause = "exit 1";
  at.pid = 1234;
  rec.attempts.push_back(at);
  auto bytes = encode(rec);
  auto back = decode<job_record>(bytes, "record");
  REQUIRE(back);
  CHECK(back->id == rec.id);
  CHECK(back->spec.command == rec.spec.command);
  CHECK(back->spec.params.at("lr") == "0.1");
  CHECK(back->spec.after.at(0).job == rec.spec.after.at(0).job);
  CHECK(back->state == job_state::timed_out);
  CHECK(back->version == 7);
  CHECK(back->attempts.at(0).id == at.id);
  CHECK(back->attempts.at(0).pid == 1234);
}

TEST_CASE("corrupt or oversized bodies are refused with a reason", "[runtime][codec]") {
  auto bytes = encode(command_spec());
  auto truncated = decode<job_spec>(bytes.substr(0, bytes.size() / 2), "spec");
  REQUIRE_FALSE(truncated);
  CHECK_THAT(truncated.error(), Catch::Contains("spec: malformed message"));
  std::string garbage(100, '\xc1'); // 0xc1 is never used in msgpack
  CHECK_FALSE(decode<job_spec>(garbage, "spec"));
  std::string huge(max_body_bytes + 1, '\0');
  auto big = decode<job_spec>(huge, "spec");
  REQUIRE_FALSE(big);
  CHECK_THAT(big.error(), Catch::Contains("exceeds the limit"));
  auto wrong_type = decode<job_record>(encode(std::string("hello")), "record");
  CHECK_FALSE(wrong_type);
}

TEST_CASE("parameter names become MONKEY_PARAM_ variables and collisions are refused",
          "[runtime][job]") {
  CHECK(param_env_name("lr") == "MONKEY_PARAM_LR");
  CHECK(param_env_name("batch-size") == "MONKEY_PARAM_BATCH_SIZE");
  auto s = command_spec();
  s.params["batch-size"] = "1";
  s.params["batch_size"] = "2";
  CHECK_THAT(validate(s).error(), Catch::Contains("collides"));
}

TEST_CASE("validation names the field and the problem", "[runtime][job]") {
  auto s = command_spec();
  CHECK(validate(s));
  s.cpus = 0;
  CHECK_THAT(validate(s).error(), Catch::StartsWith("cpus:"));
  s = command_spec();
  s.command.clear();
  CHECK_THAT(validate(s).error(), Catch::StartsWith("command:"));
  s = command_spec();
  s.after.push_back({"maybe", job_id::generate()});
  CHECK_THAT(validate(s).error(), Catch::StartsWith("after:"));
  s = command_spec();
  s.command = {"train", "--lr", "{lr}"};
  s.params["rate"] = "0.5";
  CHECK_THAT(validate(s).error(), Catch::Contains("{lr} names no parameter (parameters: rate"));
  s.params["lr"] = "0.5";
  CHECK(validate(s));
}

TEST_CASE("placeholders substitute parameters only where written", "[runtime][job]") {
  auto s = command_spec();
  s.command = {"train", "--lr={lr}", "{{literal}}", "x{array_index}"};
  s.params["lr"] = "0.1";
  s.array_index = 7;
  auto argv = substitute_params(s);
  REQUIRE(argv);
  CHECK(*argv == std::vector<std::string>{"train", "--lr=0.1", "{literal}", "x7"});
  s.command = {"sh", "-c", "f() { echo ${lr} {lr}; }; awk '{print $1}'", "bad{"};
  auto shell = substitute_params(s);
  REQUIRE(shell);
  CHECK((*shell)[2] == "f() { echo ${lr} 0.1; }; awk '{print $1}'");
  CHECK((*shell)[3] == "bad{");
  job_spec plain;
  plain.command = {"echo", "{x}"};
  CHECK(substitute_params(plain)->at(1) == "{x}"); // no parameters: nothing to substitute
}

TEST_CASE("names fill their placeholders, the retry backoff doubles up to its bound",
          "[runtime][job]") {
  auto s = command_spec();
  s.name = "sweep-lr{lr}-bs{bs}-{other}";
  s.params = {{"lr", "0.1"}, {"bs", "64"}};
  CHECK(display_name(s) == "sweep-lr0.1-bs64-{other}");
  s.array_index = 3;
  CHECK(display_name(s) == "sweep-lr0.1-bs64-{other}[3]");
  s.name = "run{array_index}";
  CHECK(display_name(s) == "run3"); // the index is in the name: no "[3]" after it
  s.retry_backoff_s = 1;
  s.retry_backoff_max_s = 60;
  CHECK(retry_delay_s(s, 1) == 1);
  CHECK(retry_delay_s(s, 3) == 4);
  CHECK(retry_delay_s(s, 7) == 60);
  CHECK(retry_delay_s(s, 40) == 60);
  s.retry_backoff_s = 0;
  CHECK(retry_delay_s(s, 2) == 0);
}

TEST_CASE("array expressions expand to indices", "[runtime][job]") {
  CHECK(*expand_array("0-3") == std::vector<int32_t>{0, 1, 2, 3});
  CHECK(*expand_array("1,3,5") == std::vector<int32_t>{1, 3, 5});
  CHECK(*expand_array("0-10:5") == std::vector<int32_t>{0, 5, 10});
  CHECK(expand_array("0-99")->size() == 100);
  CHECK_FALSE(expand_array("5-1"));
  CHECK_FALSE(expand_array("a-b"));
  CHECK_FALSE(expand_array(""));
  CHECK_FALSE(expand_array("0-999999"));
}

TEST_CASE("MONKEY_METRIC lines become key/value pairs", "[runtime][job]") {
  std::vector<std::pair<std::string, double>> kv;
  CHECK(parse_metric_line("MONKEY_METRIC step=10 loss=0.31", kv));
  REQUIRE(kv.size() == 2);
  CHECK(kv[0].first == "step");
  CHECK(kv[1].second == Approx(0.31));
  kv.clear();
  CHECK_FALSE(parse_metric_line("loss=0.3", kv));
  CHECK_FALSE(parse_metric_line("MONKEY_METRICS loss=1", kv));
  CHECK_FALSE(parse_metric_line("MONKEY_METRIC loss=abc", kv));
}

TEST_CASE("MONKEY_CHECKPOINT lines name the step their directory reached", "[runtime][job]") {
  int64_t step = 99;
  CHECK(parse_checkpoint_line("MONKEY_CHECKPOINT step=40", step));
  CHECK(step == 40);
  CHECK(parse_checkpoint_line("MONKEY_CHECKPOINT", step));
  CHECK(step == -1);
  CHECK(parse_checkpoint_line("MONKEY_CHECKPOINT step=abc", step));
  CHECK(step == -1);
  CHECK_FALSE(parse_checkpoint_line("MONKEY_CHECKPOINTS step=1", step));
  CHECK_FALSE(parse_checkpoint_line("MONKEY_METRIC step=1", step));
}

TEST_CASE("shipped bundles are checked and survive a round trip", "[runtime][job]") {
  job_spec s;
  s.command = {"python3", "train.py"};
  shipment w{"workdir", "/home/me/proj", std::string(64, 'a'), 1234, 3, "work", "src"};
  shipment d{"data", "/srv/fmnist", std::string(64, 'b'), 99, 4, "data/fmnist", ""};
  s.ship = {w, d};
  CHECK(validate(s));
  auto back = decode<job_spec>(encode(s), "spec");
  REQUIRE(back);
  REQUIRE(back->ship.size() == 2);
  CHECK(back->ship[0].sha256 == w.sha256);
  CHECK(back->ship[0].cwd == "src");
  CHECK(back->ship[1].into == "data/fmnist");
  auto bad = [&](auto change, const std::string& want) {
    auto t = s;
    change(t.ship[1]);
    auto r = validate(t);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains(want));
  };
  bad([](shipment& b) { b.sha256 = "abc"; }, "is not a SHA-256");
  bad([](shipment& b) { b.sha256 = std::string(64, 'G'); }, "is not a SHA-256");
  bad([](shipment& b) { b.kind = "code"; }, "neither workdir nor data");
  bad([](shipment& b) { b.into = "../etc"; }, "not a place in the scratch directory");
  bad([](shipment& b) { b.into = "/etc"; }, "not a place in the scratch directory");
  auto app = s;
  app.command.clear();
  app.app = "fmnist";
  CHECK_THAT(validate(app).error(), Catch::Contains("shipping is for command jobs"));
}

TEST_CASE("checkpoint_from names a whole job id", "[runtime][job]") {
  job_spec s;
  s.command = {"true"};
  s.checkpoint_from = job_id::generate().str();
  CHECK(validate(s));
  s.checkpoint_from = "abc";
  CHECK_THAT(validate(s).error(), Catch::Contains("checkpoint_from: 'abc' is not a job id"));
}

TEST_CASE("an app job's workers are a spec field with bounds", "[runtime][job]") {
  job_spec s;
  s.app = "hello";
  s.workers = 4;
  CHECK(validate(s));
  s.workers = 0;
  CHECK_THAT(validate(s).error(), Catch::Contains("workers: must be between 1 and 4096"));
  job_spec cmd; // a gang command job: N copies of the command
  cmd.command = {"true"};
  cmd.workers = 2;
  CHECK(validate(cmd));
}

TEST_CASE("rank logs sit beside the attempt's log, rank lists read as ranges", "[runtime][job]") {
  CHECK(rank_log_path("/d/logs/J/2.out", 3) == "/d/logs/J/2.rank-3.log");
  CHECK(rank_list_text({0, 1, 2, 3}) == "0-3");
  CHECK(rank_list_text({0, 2, 5, 6, 7}) == "0,2,5-7");
  CHECK(rank_list_text({4}) == "4");
  CHECK(rank_list_text({}).empty());
  for (auto ranks : {std::vector<int32_t>{0, 1, 2, 3}, {0, 2, 5, 6, 7}, {4}})
    CHECK(parse_rank_list(rank_list_text(ranks)) == ranks);
  CHECK(parse_rank_list("").empty());
  CHECK(parse_rank_list("3-1").empty());
  CHECK(parse_rank_list("1,,2").empty());
  CHECK(parse_rank_list("-1").empty());
  CHECK(parse_rank_list("x").empty());
}

TEST_CASE("a record keeps its own checkpoints, those it starts from and its bundles in use",
          "[runtime][job]") {
  job_record rec;
  rec.id = job_id::generate();
  CHECK(store_entries_of(rec) == std::vector<std::string>{rec.id.str()});
  auto from = job_id::generate();
  rec.spec.checkpoint_from = from.str();
  shipment w, d;
  w.sha256 = std::string(64, 'a');
  d.sha256 = std::string(64, 'b');
  rec.spec.ship = {w, d};
  CHECK(store_entries_of(rec)
        == std::vector<std::string>{rec.id.str(), from.str(), "ship-" + w.sha256,
                                    "ship-" + d.sha256});
  CHECK(ship_store_entry(w.sha256) == "ship-" + w.sha256);
  // Its uncommitted diff, when stored in the cluster (only then: an inline diff is no entry).
  rec.spec.ship.clear();
  rec.spec.provenance["git_diff_sha256"] = std::string(64, 'c');
  CHECK(store_entries_of(rec) == std::vector<std::string>{rec.id.str(), from.str()});
  rec.spec.provenance["git_diff_stored"] = "yes";
  CHECK(store_entries_of(rec) == std::vector<std::string>{rec.id.str(), from.str(),
                                                          "ship-" + std::string(64, 'c')});
}
