// SPDX-License-Identifier: Apache-2.0
// A driver attempt against a cluster that answers the client verbs (encoded as a node's
// router encodes them): the sweep read from the job's environment, its trials submitted,
// followed and finished, its progress and checkpoint lines, a next attempt going on from the
// saved state, a stop, and a cluster that stops answering. The real node's version of these
// is tests/integration/test_sweep.py.
#include "runtime/sweep/drive.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "runtime/wire/codec.hpp"

using namespace monkey;
using namespace monkey::sweep;

namespace {

const char* grid_sweep = R"(name: g
trial: {command: [./t, "{x}"]}
space: {x: {type: grid, values: ["0.25", "0.5", "0.75"]}}
metric: {name: acc, goal: maximize}
algorithm: {name: grid}
parallel: 2
)";

struct verb_job {
  job_summary row;
  std::string key;
  std::vector<double> points;
  bool stop_asked = false;
};

/// Trials gain a point (their x) per listing and succeed after their second.
class verb_fake {
public:
  std::vector<verb_job> jobs;
  int submits = 0, lists = 0, shows = 0, stops = 0;
  bool down = false; ///< every verb fails, as a node that does not answer

  expected<std::string> operator()(verb v, const std::string& body) {
    if (down)
      return failure{"request timed out"};
    switch (v) {
      case verb::submit: {
        ++submits;
        auto req = decode<submit_request>(body, "submit");
        REQUIRE(req);
        submit_reply r;
        for (auto& j : jobs)
          if (j.key == req->client_key) {
            r.ids = {j.row.id};
            r.duplicate = true;
            return encode(r);
          }
        verb_job j;
        j.row.id = job_id::generate();
        j.row.state = job_state::running;
        j.row.sweep = req->spec.sweep;
        j.row.trial = req->spec.trial;
        j.row.params = req->spec.params;
        j.key = req->client_key;
        jobs.push_back(j);
        r.ids = {j.row.id};
        return encode(r);
      }
      case verb::list: {
        ++lists;
        list_reply r;
        for (auto& j : jobs) {
          if (j.row.state == job_state::running) {
            if (j.stop_asked) {
              j.row.state = job_state::stopped;
            } else {
              j.points.push_back(std::stod(j.row.params.at("x")));
              if (j.points.size() >= 2)
                j.row.state = job_state::succeeded;
            }
          }
          auto row = j.row;
          if (!j.points.empty()) {
            row.metrics["acc"] = j.points.back();
            row.metric_counts["acc"] = static_cast<int64_t>(j.points.size());
          }
          r.jobs.push_back(row);
        }
        return encode(r);
      }
      case verb::show: {
        ++shows;
        auto req = decode<id_request>(body, "show");
        REQUIRE(req);
        for (auto& j : jobs)
          if (j.row.id.str() == req->id) {
            show_reply r;
            for (size_t i = 0; i < j.points.size(); ++i)
              r.series.push_back(metric_point{j.row.id, 1, 0, "acc", j.points[i],
                                              static_cast<int64_t>(i + 1), 0});
            r.metric_history["acc"].count = static_cast<int64_t>(j.points.size());
            return encode(r);
          }
        return failure{"no such job"};
      }
      case verb::cancel: {
        ++stops;
        auto req = decode<id_request>(body, "cancel");
        REQUIRE(req);
        CHECK(req->stop);
        for (auto& j : jobs)
          if (j.row.id.str() == req->id)
            j.stop_asked = true;
        return encode(text_reply{"stopping"});
      }
      default:
        return failure{"unexpected verb"};
    }
  }
};

struct attempt_io {
  std::vector<std::string> out, log;
  driver::sinks sinks() {
    driver::sinks s;
    s.out = [this](const std::string& l) { out.push_back(l); };
    s.log = [this](const std::string& l) { log.push_back(l); };
    return s;
  }
  size_t count(const std::string& prefix) const {
    size_t n = 0;
    for (auto& l : out)
      n += l.rfind(prefix, 0) == 0;
    return n;
  }
};

std::map<std::string, std::string> env_of(const std::string& dir) {
  return {{"MONKEY_JOB_ID", job_id::generate().str()},
          {"MONKEY_SWEEP_FILE", grid_sweep},
          {"MONKEY_SWEEP_ORIGIN", "g.yaml"},
          {"MONKEY_CHECKPOINT_DIR", dir}};
}

/// Ticks until the attempt ends (or `limit` ticks); the clock advances by each pause.
drive_next run(driver& d, int64_t& now, int limit = 200) {
  drive_next n;
  for (int i = 0; i < limit; ++i) {
    n = d.tick(now);
    if (n.done)
      return n;
    now += n.pause_ms;
  }
  return n;
}

struct temp_dir {
  std::string path;
  temp_dir() {
    path = std::filesystem::temp_directory_path().string() + "/monkey-drive-"
           + job_id::generate().short_str();
    std::filesystem::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

/// A driver attempt of `env` against `cluster`, its lines into `io`.
expected<std::unique_ptr<driver>> attempt(const std::map<std::string, std::string>& env,
                                          verb_fake& cluster, attempt_io& io) {
  return driver::from_env(env, "/work",
                          [&cluster](verb v, const std::string& b) { return cluster(v, b); },
                          io.sinks());
}

/// One attempt of a fresh sweep, its checkpoints in a directory of its own.
struct fresh_attempt {
  temp_dir dir;
  verb_fake cluster;
  attempt_io io;
  std::unique_ptr<driver> d;
  int64_t now = 1'000'000;
  fresh_attempt() {
    auto r = attempt(env_of(dir.path), cluster, io);
    REQUIRE(r);
    d = std::move(*r);
  }
};

} // namespace

TEST_CASE("a driver attempt runs its sweep through the verbs and says so in its lines",
          "[sweep][drive]") {
  fresh_attempt a;
  auto& [dir, cluster, io, d, now] = a;
  auto end = run(*d, now);
  REQUIRE(end.done);
  CHECK(end.code == 0);
  CHECK(cluster.jobs.size() == 3); // the grid, each point once
  for (auto& j : cluster.jobs)
    CHECK(j.row.state == job_state::succeeded);
  // Progress as metric lines, the last one naming the best trial (x = 0.75: trial 2).
  REQUIRE(io.count("MONKEY_METRIC ") > 0);
  std::string last;
  for (auto& l : io.out)
    if (l.rfind("MONKEY_METRIC ", 0) == 0)
      last = l;
  CHECK(last.find("trials_done=3") != std::string::npos);
  CHECK(last.find("best=0.75 best_trial=2") != std::string::npos);
  // Its state saved before each submit and after results: the file, then the line.
  CHECK(io.count("MONKEY_CHECKPOINT step=") >= 3);
  CHECK(std::filesystem::exists(dir.path + "/sweep-state.json"));
  CHECK(io.log.back().find("finished: 3 trials") != std::string::npos);
}

TEST_CASE("a driver's next attempt goes on from the saved state without a trial twice",
          "[sweep][drive]") {
  temp_dir dir;
  verb_fake cluster;
  auto env = env_of(dir.path);
  {
    attempt_io io;
    auto d = attempt(env, cluster, io);
    REQUIRE(d);
    int64_t now = 1'000'000;
    auto n = run(**d, now, 2); // two trials submitted, none ended
    CHECK_FALSE(n.done);
    CHECK(cluster.jobs.size() == 2);
  }
  // The node died; a holder adopts the job and restores its checkpoint (the last step).
  env["MONKEY_CHECKPOINT_STEP"] = "7";
  attempt_io io;
  auto d = attempt(env, cluster, io);
  REQUIRE(d);
  CHECK(io.log.front().find("going on from the saved state: 2 trials") != std::string::npos);
  int64_t now = 2'000'000;
  auto end = run(**d, now);
  REQUIRE(end.done);
  CHECK(end.code == 0);
  CHECK(cluster.jobs.size() == 3); // the third started once, the first two kept
  // Its checkpoint steps go on from the restored one.
  REQUIRE(io.count("MONKEY_CHECKPOINT step=") > 0);
  for (auto& l : io.out)
    if (l.rfind("MONKEY_CHECKPOINT step=", 0) == 0)
      CHECK(std::stoll(l.substr(23)) > 7);
}

TEST_CASE("a stopped driver stops its running trials and ends 143", "[sweep][drive]") {
  fresh_attempt a;
  auto& [dir, cluster, io, d, now] = a;
  REQUIRE_FALSE(run(*d, now, 1).done);
  d->stop();
  auto end = run(*d, now);
  REQUIRE(end.done);
  CHECK(end.code == 143);
  CHECK(cluster.stops == 2);
  CHECK(cluster.jobs.size() == 2); // no trial started after the stop
  for (auto& j : cluster.jobs)
    CHECK(j.row.state == job_state::stopped);
}

TEST_CASE("a driver whose cluster stops answering tries again, then ends 75",
          "[sweep][drive]") {
  temp_dir dir;
  verb_fake cluster;
  cluster.down = true;
  attempt_io io;
  auto d = attempt(env_of(dir.path), cluster, io);
  REQUIRE(d);
  int64_t now = 1'000'000;
  auto n = (*d)->tick(now);
  CHECK_FALSE(n.done);
  CHECK(n.pause_ms == 1000); // again a second later
  // Answers again within 30 s: it goes on.
  cluster.down = false;
  now += 20'000;
  CHECK_FALSE((*d)->tick(now).done);
  cluster.down = true;
  now += 1000;
  CHECK_FALSE((*d)->tick(now).done);
  now += 29'000;
  CHECK_FALSE((*d)->tick(now).done);
  now += 2000;
  auto end = (*d)->tick(now);
  CHECK(end.done);
  CHECK(end.code == 75);
  CHECK(io.log.back().find("has not answered for 30 s") != std::string::npos);
}

TEST_CASE("a driver job whose sweep does not read says what is wrong", "[sweep][drive]") {
  auto call = [](verb, const std::string&) -> expected<std::string> {
    return failure{"unused"};
  };
  auto env = env_of("");
  env.erase("MONKEY_JOB_ID");
  auto d = driver::from_env(env, "/", call, {});
  REQUIRE_FALSE(d);
  CHECK(d.error().find("MONKEY_JOB_ID") != std::string::npos);
  env = env_of("");
  env["MONKEY_SWEEP_FILE"] = "name: x\ntrial: {command: [./t]}\nspace: {x: {type: grid, values: [1]}}\n"
                             "metric: {name: acc}\n"
                             "algorithm: {name: annealing}\n";
  d = driver::from_env(env, "/", call, {});
  REQUIRE_FALSE(d);
  CHECK(d.error().find("algorithm") != std::string::npos);
  // A saved state that does not read ends the attempt, naming it.
  temp_dir dir;
  env = env_of(dir.path);
  env["MONKEY_CHECKPOINT_STEP"] = "3";
  std::ofstream(dir.path + "/sweep-state.json") << "{not json";
  d = driver::from_env(env, "/", call, {});
  REQUIRE_FALSE(d);
  CHECK(d.error().find("saved state") != std::string::npos);
}
