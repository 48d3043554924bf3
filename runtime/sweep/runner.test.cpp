// SPDX-License-Identifier: Apache-2.0
// The sweep runner against a scripted cluster: trials are jobs that report one point per
// round along a learning curve their parameters decide, and end after max_t points; a stop
// ends them `stopped`. The real cluster's version of these is tests/integration/test_sweep.py.
#include "runtime/sweep/runner.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

using namespace monkey;
using namespace monkey::sweep;

namespace {

struct fake_job {
  trial_job row;
  job_spec spec;
  std::string key;
  std::vector<std::pair<int64_t, double>> points;
  int64_t per_epoch = 1; ///< steps between its points (by_epoch: as a batch size would)
};

/// A cluster whose jobs advance one step per tick.
class fake_cluster final : public cluster {
public:
  int64_t max_t = 9;
  int submits = 0;
  /// Jobs report a point every 1, 2 or 3 steps (by the order they were submitted in), and
  /// an `epoch` point beside each: max_t counts epochs.
  bool by_epoch = false;
  /// The listing gives each job's point counts (as a real one does with metrics).
  bool counting = false;
  /// The next reads answer as a member that lacks a job's newest point would (its count
  /// one lower too), this many times.
  int behind = 0;
  int reads = 0;
  /// Points of another key (not the sweep's metric) each listed job has.
  int64_t loss = 0;
  /// Reads of this job fail (a member that did not answer).
  std::string failing;
  /// The listing gives these counts for every job, whatever it has (a member behind).
  std::optional<int64_t> frozen;
  std::vector<fake_job> jobs_;

  expected<std::string> submit(const job_spec& spec, const std::string& key) override {
    ++submits;
    for (auto& j : jobs_)
      if (j.key == key)
        return j.row.id;
    fake_job j;
    j.row.id = "job" + std::to_string(jobs_.size());
    j.row.trial = spec.trial;
    j.row.state = job_state::running;
    j.row.submitted_ms = static_cast<int64_t>(jobs_.size());
    j.row.params = spec.params;
    j.spec = spec;
    j.key = key;
    j.per_epoch = by_epoch ? 1 + static_cast<int64_t>(jobs_.size() % 3) : 1;
    if (!spec.checkpoint_from.empty()) // a continuation resumes at its donor's last step
      for (auto& d : jobs_)
        if (d.row.id == spec.checkpoint_from && !d.points.empty())
          j.points.push_back(d.points.back());
    jobs_.push_back(std::move(j));
    return jobs_.back().row.id;
  }
  expected<std::vector<trial_job>> jobs() override {
    std::vector<trial_job> out;
    for (auto& j : jobs_) {
      out.push_back(j.row);
      if (counting) {
        out.back().counted = true;
        if (!j.points.empty())
          out.back().counts = {{"acc", static_cast<int64_t>(j.points.size())},
                               {"epoch", static_cast<int64_t>(j.points.size())}};
        if (loss > 0)
          out.back().counts["loss"] = loss;
        if (frozen)
          out.back().counts = {{"acc", *frozen}, {"epoch", *frozen}};
      }
    }
    return out;
  }
  expected<metric_read> series(const std::string& id, const std::string& metric) override {
    ++reads;
    if (id == failing)
      return failure{"show " + id + ": timed out"};
    for (auto& j : jobs_)
      if (j.row.id == id) {
        metric_read r;
        r.points = j.points;
        if (behind > 0 && !r.points.empty()) {
          --behind;
          r.points.pop_back();
        }
        r.count = static_cast<int64_t>(r.points.size());
        if (metric == "epoch")
          for (auto& p : r.points)
            p.second = static_cast<double>(p.first / j.per_epoch);
        return r;
      }
    return failure{"no job " + id};
  }
  status stop(const std::string& id) override {
    for (auto& j : jobs_)
      if (j.row.id == id && !is_final(j.row.state))
        j.row.state = job_state::stopped;
    return {};
  }
  /// Jobs fail at once (a script that does not exist): every one, or those whose x is
  /// below `fail_below`.
  bool fail_all = false;
  double fail_below = -1;
  /// Every running job reports its next point: accuracy rising to a ceiling set by x.
  void tick() {
    for (auto& j : jobs_) {
      if (j.row.state != job_state::running)
        continue;
      if (fail_all || std::stod(j.spec.params.at("x")) < fail_below) {
        j.row.state = job_state::failed;
        continue;
      }
      auto x = std::stod(j.spec.params.at("x"));
      auto epoch = j.points.empty() ? 1 : j.points.back().first / j.per_epoch + 1;
      j.points.push_back({epoch * j.per_epoch, x * (1 - std::exp(-0.5 * static_cast<double>(epoch)))});
      if (epoch >= max_t)
        j.row.state = job_state::succeeded;
    }
  }
  const fake_job* by_id(const std::string& id) const {
    for (auto& j : jobs_)
      if (j.row.id == id)
        return &j;
    return nullptr;
  }
};

sweep_spec spec_of(const std::string& yaml) {
  auto s = parse_sweep_text(yaml, "test.yaml");
  INFO((s ? std::string() : s.error()));
  REQUIRE(s);
  return *s;
}

const char* asha_yaml = R"(
name: t
trial: {command: [train, "{x}"]}
space: {x: {type: uniform, low: 0, high: 1}}
metric: {name: acc}
algorithm: {name: asha, seed: 3, reduction_factor: 3, grace: 1, max_t: 9}
budget: {trials: 12}
parallel: 3
)";

const char* pbt_yaml = R"(
name: p
trial: {command: [train, "{x}"]}
space: {x: {type: uniform, low: 0, high: 1}}
metric: {name: acc}
algorithm: {name: pbt, seed: 5, population: 4, interval: 3, quantile: 0.25, max_t: 12}
budget: {trials: 4}
parallel: 4
)";

/// Runs rounds (a tick of the cluster after each) until the sweep is finished.
int run_to_end(runner& r, fake_cluster& c, int64_t& now, int limit = 400) {
  int rounds = 0;
  while (!r.where().finished && rounds < limit) {
    REQUIRE(r.round(now));
    c.tick();
    now += 100;
    ++rounds;
  }
  return rounds;
}

} // namespace

TEST_CASE("a sweep starts exactly its budget's trials, stops the ones ASHA stops, and "
          "records the best", "[sweep][runner]") {
  fake_cluster c;
  auto spec = spec_of(asha_yaml);
  auto opt = make_optimizer(spec);
  REQUIRE(opt);
  runner r(spec, "SW", "/tmp", std::move(*opt), c);
  r.provenance = {{"git_commit", "abc"}};
  r.user = "ada";
  r.host = "lab7";
  int64_t now = 1000;
  run_to_end(r, c, now);
  auto p = r.where();
  REQUIRE(p.finished);
  CHECK(p.started == 12);
  CHECK(p.ended == 12);
  CHECK(c.jobs_.size() == 12);
  std::set<std::string> keys;
  int stopped = 0, succeeded = 0;
  double best = -1;
  for (auto& j : c.jobs_) {
    keys.insert(j.key);
    CHECK(j.spec.sweep == "SW");
    CHECK(j.spec.provenance.at("git_commit") == "abc"); // every trial can be reproduced
    CHECK(j.spec.user == "ada"); // who started the sweep, not "@"
    CHECK(j.spec.host == "lab7");
    CHECK(j.spec.has_seed);
    CHECK(j.key == "SW-" + std::to_string(j.spec.trial));
    CHECK(j.spec.command == std::vector<std::string>{"train", j.spec.params.at("x")});
    stopped += j.row.state == job_state::stopped;
    succeeded += j.row.state == job_state::succeeded;
    if (j.row.state == job_state::succeeded)
      best = std::max(best, j.points.back().second);
  }
  CHECK(keys.size() == 12);
  CHECK(stopped > 0);      // ASHA stops the weak ones at a rung
  CHECK(succeeded > 0);    // and lets the strong ones reach max_t
  CHECK(stopped + succeeded == 12);
  REQUIRE(p.best);
  CHECK(*p.best == Approx(best));
  for (auto& row : r.trials())
    if (row.end == "stopped")
      CHECK(row.why.find("stopped by asha at step") == 0);
  // No more than `parallel` ran at once: the rounds show it through the submit order.
  CHECK(c.submits == 12);
}

TEST_CASE("resource_metric: ASHA judges trials whose steps per epoch differ by their "
          "epoch metric, as if every step were an epoch",
          "[sweep][runner]") {
  auto run = [](bool by_epoch) {
    fake_cluster c;
    c.by_epoch = by_epoch;
    std::string yaml = asha_yaml;
    if (by_epoch)
      yaml.replace(yaml.find("max_t: 9}"), 9, "max_t: 9, resource: epoch, resource_metric: epoch}");
    auto spec = spec_of(yaml);
    auto opt = make_optimizer(spec);
    REQUIRE(opt);
    runner r(spec, "SW", "/tmp", std::move(*opt), c);
    int64_t now = 1000;
    run_to_end(r, c, now);
    REQUIRE(r.where().finished);
    std::vector<std::string> out;
    for (auto& row : r.trials())
      out.push_back(row.end + " " + row.why);
    return out;
  };
  auto plain = run(false), epochs = run(true);
  REQUIRE(plain.size() == 12);
  REQUIRE(epochs.size() == 12);
  for (size_t i = 0; i < plain.size(); ++i) {
    auto expect = plain[i];
    if (auto at = expect.find("at step "); at != std::string::npos)
      expect.replace(at, 8, "at epoch ");
    CHECK(epochs[i] == expect);
  }
  CHECK(std::count_if(epochs.begin(), epochs.end(),
                      [](auto& e) { return e.rfind("stopped", 0) == 0; })
        > 0);
  // Points without an epoch point at their step wait; the order is the epochs'.
  auto mapped = with_resource({{3, 0.1}, {6, 0.2}, {7, 0.25}, {9, 0.3}}, {{3, 1}, {6, 2}, {9, 3}});
  CHECK(mapped == std::vector<std::pair<int64_t, double>>{{1, 0.1}, {2, 0.2}, {3, 0.3}});
  // A bad key is named.
  auto bad = parse_sweep_text(std::string(asha_yaml).replace(std::string(asha_yaml).find("max_t: 9}"), 9,
                                                             "max_t: 9, resource_metric: \"\"}"),
                              "t.yaml");
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error(), Catch::Contains("algorithm.resource_metric: empty"));
  auto tpe = parse_sweep_text("trial: {command: [a]}\nspace: {x: {type: uniform, low: 0, high: 1}}\n"
                              "metric: {name: m}\nalgorithm: {name: tpe, resource_metric: epoch}\n"
                              "budget: {trials: 3}\n",
                              "t.yaml");
  REQUIRE_FALSE(tpe);
  CHECK_THAT(tpe.error(), Catch::Contains("not a setting of tpe"));
}

TEST_CASE("a driver going on from an older saved state repeats no trial and loses none",
          "[sweep][runner]") {
  for (int cut : {1, 3, 6, 10, 13}) {
    fake_cluster c;
    auto spec = spec_of(asha_yaml);
    std::string saved;
    int saves = 0;
    {
      auto opt = make_optimizer(spec);
      runner r(spec, "SW", "/tmp", std::move(*opt), c);
      // The state as the holders have it: the save from `cut` saves before the driver died.
      std::vector<std::string> history;
      r.on_change = [&](const std::string& s) { history.push_back(s); };
      int64_t now = 1000;
      for (int k = 0; k < 8; ++k) {
        REQUIRE(r.round(now));
        c.tick();
        now += 100;
      }
      saves = static_cast<int>(history.size());
      REQUIRE(saves > cut);
      saved = history[static_cast<size_t>(saves - cut)];
    }
    auto opt = make_optimizer(spec);
    runner again(spec, "SW", "/tmp", std::move(*opt), c);
    REQUIRE(again.restore(saved));
    REQUIRE(again.reconcile());
    int64_t now = 5000;
    run_to_end(again, c, now);
    INFO("went on from the save " << cut << " before the last of " << saves);
    auto p = again.where();
    REQUIRE(p.finished);
    CHECK(p.started == 12);
    CHECK(c.jobs_.size() == 12); // every trial once: none repeated
    std::set<int32_t> trials;
    for (auto& j : c.jobs_) {
      trials.insert(j.row.trial);
      CHECK(is_final(j.row.state));
    }
    CHECK(trials.size() == 12);
    for (auto& row : again.trials()) { // every trial followed to its end with its own job
      CHECK(row.ended);
      auto* j = c.by_id(row.job);
      REQUIRE(j);
      CHECK(j->row.trial == row.n);
      CHECK(row.end == to_string(j->row.state));
    }
  }
}

TEST_CASE("the wall budget stops the running trials and starts no more", "[sweep][runner]") {
  fake_cluster c;
  c.max_t = 1000;
  auto spec = spec_of(R"(
name: w
trial: {command: [train, "{x}"]}
space: {x: {type: uniform, low: 0, high: 1}}
metric: {name: acc}
algorithm: {name: random, seed: 1}
budget: {trials: 50, wall: 2s}
parallel: 2
)");
  runner r(spec, "W", "/tmp", std::move(*make_optimizer(spec)), c);
  int64_t now = 1000;
  run_to_end(r, c, now);
  auto p = r.where();
  REQUIRE(p.finished);
  CHECK(p.stopping == "the wall budget ran out");
  CHECK(p.started == 2);
  for (auto& j : c.jobs_)
    CHECK(j.row.state == job_state::stopped);
  for (auto& row : r.trials())
    CHECK(row.why == "stopped: the wall budget ran out");
}

TEST_CASE("stop_all stops every running trial, a grid ends when its points are done",
          "[sweep][runner]") {
  fake_cluster c;
  auto spec = spec_of(R"(
name: g
trial: {command: [train, "{x}"]}
space: {x: {type: grid, values: [0.1, 0.2, 0.3]}}
metric: {name: acc}
algorithm: {name: grid}
parallel: 2
)");
  runner r(spec, "G", "/tmp", std::move(*make_optimizer(spec)), c);
  int64_t now = 1000;
  run_to_end(r, c, now);
  CHECK(r.where().finished);
  CHECK(c.jobs_.size() == 3);

  fake_cluster c2;
  c2.max_t = 1000;
  runner s(spec, "G2", "/tmp", std::move(*make_optimizer(spec)), c2);
  REQUIRE(s.round(now));
  c2.tick();
  s.stop_all("stopped by the user");
  REQUIRE(s.round(now));
  CHECK(s.where().finished);
  CHECK(c2.jobs_.size() == 2);
  for (auto& j : c2.jobs_)
    CHECK(j.row.state == job_state::stopped);
}

TEST_CASE("PBT's exploit continues a trial from its donor's checkpoint as a new job",
          "[sweep][runner]") {
  fake_cluster c;
  c.max_t = 12;
  auto spec = spec_of(pbt_yaml);
  runner r(spec, "P", "/tmp", std::move(*make_optimizer(spec)), c);
  int64_t now = 1000;
  run_to_end(r, c, now);
  REQUIRE(r.where().finished);
  int continuations = 0;
  for (auto& j : c.jobs_)
    if (!j.spec.checkpoint_from.empty()) {
      ++continuations;
      auto* donor = c.by_id(j.spec.checkpoint_from);
      REQUIRE(donor);
      CHECK(donor->row.trial != j.row.trial);
      CHECK(j.key.find("P-" + std::to_string(j.row.trial) + ".") == 0);
    }
  CHECK(continuations > 0);
  std::set<int32_t> members;
  for (auto& j : c.jobs_)
    members.insert(j.row.trial);
  CHECK(members.size() == 4);
  for (auto& row : r.trials())
    CHECK(row.ended);
}

TEST_CASE("a driver that falls behind takes the trials' points in step order: PBT still "
          "exploits",
          "[sweep][runner]") {
  // The trials run whole between two rounds (a busy node, a slow answer, an adoption): fed
  // trial by trial, the first trial's every point would be ranked before any other trial
  // had one, and no member would ever be in the bottom quantile.
  fake_cluster c;
  c.max_t = 12;
  auto spec = spec_of(pbt_yaml);
  runner r(spec, "P", "/tmp", std::move(*make_optimizer(spec)), c);
  std::vector<std::string> lines;
  r.on_log = [&](const std::string& l) { lines.push_back(l); };
  int64_t now = 1000;
  for (int round = 0; round < 40 && !r.where().finished; ++round) {
    REQUIRE(r.round(now));
    for (int t = 0; t < 12; ++t)
      c.tick();
    now += 100;
  }
  REQUIRE(r.where().finished);
  int exploits = 0;
  for (auto& l : lines)
    exploits += l.find("exploits trial") != std::string::npos;
  CHECK(exploits > 0);
  // The first exploit came at the first interval, as it would have live: judged at step 3
  // once every member had reached it, acted on at the judged member's step 3 or, when it
  // got there before the others, its next one.
  auto first = std::find_if(lines.begin(), lines.end(),
                            [](auto& l) { return l.find("exploits trial") != std::string::npos; });
  REQUIRE(first != lines.end());
  CHECK((first->find(" at step 3:") != std::string::npos
         || first->find(" at step 4:") != std::string::npos));
}

TEST_CASE("a trial's value is its last point, or its best with use: best", "[sweep][runner]") {
  metric_spec m;
  std::vector<std::pair<int64_t, double>> pts{{1, 0.5}, {2, 0.9}, {3, 0.7}};
  CHECK(*value_of(m, pts) == 0.7);
  m.best = true;
  CHECK(*value_of(m, pts) == 0.9);
  m.maximize = false;
  CHECK(*value_of(m, pts) == 0.5);
  CHECK_FALSE(value_of(m, {}));
  CHECK(*value_of(m, {{1, NAN}, {2, 0.4}}) == 0.4);
}

TEST_CASE("with the listing's point counts, a round reads only the trials that reported "
          "something new and decides as one that reads them all",
          "[sweep][runner]") {
  // The same ASHA sweep twice, reading every trial every round and with counts; each tick
  // of the cluster is followed by two rounds in which nothing happens.
  auto outcome = [](bool counting, int& reads, int& skipped, int& quiet) {
    fake_cluster c;
    c.counting = counting;
    auto spec = spec_of(asha_yaml);
    auto opt = make_optimizer(spec);
    REQUIRE(opt);
    runner r(spec, "SW", "/tmp", std::move(*opt), c);
    int64_t now = 1000;
    for (int rounds = 0; !r.where().finished && rounds < 400; ++rounds) {
      if (counting && rounds == 5)
        c.behind = 2; // a member behind answers the next two reads
      REQUIRE(r.round(now));
      now += 100;
      for (int idle = 0; idle < 2; ++idle) {
          REQUIRE(r.round(now));
          quiet += r.quiet();
          now += 100;
        }
      c.tick();
    }
    REQUIRE(r.where().finished);
    reads = c.reads;
    skipped = static_cast<int>(r.skipped_reads());
    std::vector<std::string> ends;
    for (auto& row : r.trials())
      ends.push_back(row.end + " " + row.why + " " + std::to_string(row.steps));
    return std::make_pair(ends, *r.where().best);
  };
  int all_reads = 0, no_skips = 0, no_quiet = 0, reads = 0, skipped = 0, quiet = 0;
  auto every = outcome(false, all_reads, no_skips, no_quiet);
  auto counted = outcome(true, reads, skipped, quiet);
  CHECK(counted == every); // the same trials stopped at the same steps, the same best
  CHECK(no_skips == 0);
  CHECK(skipped > 0);
  CHECK(quiet > 0);
  CHECK(no_quiet >= quiet); // the reads behind found their points a round later
  // Each trial is read about once per point (and when listed first and when it ends), not
  // every round.
  CHECK(reads < all_reads * 2 / 3);
  CHECK(reads + skipped == all_reads);
}

TEST_CASE("a round is quiet only when the listing shows the trials as before, any key's "
          "counts included",
          "[sweep][runner]") {
  fake_cluster c;
  c.counting = true;
  auto spec = spec_of(asha_yaml);
  auto opt = make_optimizer(spec);
  REQUIRE(opt);
  runner r(spec, "SW", "/tmp", std::move(*opt), c);
  int64_t now = 1000;
  REQUIRE(r.round(now)); // starts the trials
  CHECK_FALSE(r.quiet());
  REQUIRE(r.round(now += 100));
  REQUIRE(r.round(now += 100));
  CHECK(r.quiet()); // nothing reported, nothing started
  auto reads = c.reads;
  c.loss = 5; // the trials report something the sweep does not follow
  REQUIRE(r.round(now += 100));
  CHECK_FALSE(r.quiet()); // they are at work: the driver keeps its pace
  CHECK(c.reads == reads); // and reads nothing (the metric's counts did not move)
  REQUIRE(r.round(now += 100));
  CHECK(r.quiet());
  c.tick(); // a point of the metric: read, taken in
  REQUIRE(r.round(now += 100));
  CHECK_FALSE(r.quiet());
  CHECK(c.reads > reads);
}

TEST_CASE("a round that fails reads its trials again, and a running trial is read every few "
          "seconds whatever the listing counts",
          "[sweep][runner]") {
  fake_cluster c;
  c.counting = true;
  auto spec = spec_of(R"(
name: t
trial: {command: [train, "{x}"]}
space: {x: {type: uniform, low: 0, high: 1}}
metric: {name: acc}
algorithm: {name: random, seed: 3}
budget: {trials: 2}
parallel: 2
)");
  auto opt = make_optimizer(spec);
  REQUIRE(opt);
  runner r(spec, "SW", "/tmp", std::move(*opt), c);
  int64_t now = 1000;
  REQUIRE(r.round(now));
  REQUIRE(c.jobs_.size() >= 2);
  c.tick();
  // The first trial's read succeeds, the second's fails: the round fails before the points
  // reach the optimizer.
  c.failing = c.jobs_[1].row.id;
  CHECK_FALSE(r.round(now += 100));
  CHECK(r.trials()[0].steps == 0);
  c.failing.clear();
  REQUIRE(r.round(now += 100)); // the same counts listed: both read again all the same
  CHECK(r.trials()[0].steps == 1);
  CHECK(r.trials()[1].steps == 1);
  // A listing stuck at one point per trial while they go on reporting: no read until the
  // last read is 5 s old, then one.
  c.frozen = 1;
  c.tick();
  REQUIRE(r.round(now += 100));
  CHECK(r.trials()[0].steps == 1);
  REQUIRE(r.round(now += 4000));
  CHECK(r.trials()[0].steps == 1);
  REQUIRE(r.round(now += 1000));
  CHECK(r.trials()[0].steps == 2);
  CHECK(r.trials()[1].steps == 2);
}

const char* random_yaml = R"(
name: r
trial: {command: [train, "{x}"]}
space: {x: {type: uniform, low: 0, high: 1}}
metric: {name: acc}
algorithm: {name: random, seed: 3}
budget: {trials: 6}
parallel: 2
)";

namespace {

/// A sweep of `spec` over `c`, run to its end: where it ended.
progress finished(const sweep_spec& spec, fake_cluster& c) {
  auto opt = make_optimizer(spec);
  REQUIRE(opt);
  runner r(spec, "SW", "/tmp", std::move(*opt), c);
  int64_t now = 1000;
  run_to_end(r, c, now);
  auto p = r.where();
  REQUIRE(p.finished);
  return p;
}

} // namespace

TEST_CASE("a sweep whose trials all fail counts them and fails, naming why",
          "[sweep][runner]") {
  fake_cluster c;
  c.fail_all = true;
  auto p = finished(spec_of(random_yaml), c);
  CHECK(p.ended == 6);
  CHECK(p.failed == 6);
  CHECK(p.good == 0);
  CHECK(p.failure == "no trial succeeded: 6 of 6 failed");
}

TEST_CASE("a sweep with some failed trials succeeds, past max_failed_trials it stops and fails",
          "[sweep][runner]") {
  SECTION("no bound: the failed trials are counted, the sweep has its best") {
    fake_cluster c;
    c.fail_below = 0.5;
    auto p = finished(spec_of(random_yaml), c);
    CHECK(p.failed > 0);
    CHECK(p.good == 6 - p.failed);
    CHECK(p.good > 0);
    CHECK(p.failure.empty());
  }
  SECTION("max_failed_trials: 1: the second failure stops the sweep, which says why") {
    fake_cluster c;
    c.fail_all = true;
    auto spec = spec_of(std::string(random_yaml) + "max_failed_trials: 1\n");
    CHECK(spec.max_failed_trials == 1);
    auto p = finished(spec, c);
    CHECK(p.started == 2); // two ran at once; no third started
    CHECK(p.failed == 2);
    CHECK(p.failure == "2 trials failed, more than max_failed_trials (1)");
  }
}

TEST_CASE("max_failed_trials is read from the sweep file and checked", "[sweep][runner]") {
  CHECK(spec_of(random_yaml).max_failed_trials == -1);
  auto bad = parse_sweep_text(std::string(random_yaml) + "max_failed_trials: -3\n", "t.yaml");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().find("max_failed_trials") != std::string::npos);
}
