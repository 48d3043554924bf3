// SPDX-License-Identifier: Apache-2.0
// `monkey sweep drive`: a sweep's driver, run by a node as the sweep's driver job (never by
// hand). It connects back to its node with its attempt's driver key, goes on from the
// job's checkpoint (the runner's saved state) when there is one, and runs rounds until the
// sweep is finished (runtime/sweep/runner.hpp; docs/sweeps.md, "How a sweep runs").
#include "runtime/bin/cli/cli.hpp"

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <unistd.h>

#include "runtime/sweep/runner.hpp"

namespace monkey::cli {

namespace {

std::atomic<bool> stop_asked{false};

void on_term(int) {
  stop_asked = true;
}

std::string env_or(const char* name, const std::string& fallback = {}) {
  auto* v = std::getenv(name);
  return v ? std::string(v) : fallback;
}

void say(const std::string& line) {
  std::fprintf(stderr, "%s sweep: %s\n", clock_time(now_ms()).c_str(), line.c_str());
  std::fflush(stderr);
}

/// The cluster as the driver's session sees it.
class session_cluster final : public sweep::cluster {
public:
  session_cluster(std::string sweep_id) : sweep_(std::move(sweep_id)) {}

  status connect() {
    tls_files tls;
    tls.cert = env_or("MONKEY_TLS_CERT");
    tls.key = env_or("MONKEY_TLS_KEY");
    tls.ca = env_or("MONKEY_TLS_CA");
    credentials who{env_or("MONKEY_SESSION_KEY")};
    who.role = "driver";
    who.attempt = env_or("MONKEY_ATTEMPT_ID");
    auto c = client::connect({env_or("MONKEY_NODE_ADDRESS")}, who, tls);
    if (!c)
      return failure{c.error()};
    client_ = std::move(*c);
    return {};
  }

  expected<std::string> submit(const job_spec& spec, const std::string& key) override {
    submit_request req;
    req.spec = spec;
    req.client_key = key;
    req.retry = true; // the owner looks the key up everywhere before it creates anything
    auto r = client_->call<submit_reply>(verb::submit, req);
    if (!r)
      return failure{"submit: " + r.error()};
    if (r->ids.empty())
      return failure{"submit: no job id in the answer"};
    return r->ids.front().str();
  }

  expected<std::vector<sweep::trial_job>> jobs() override {
    list_request req;
    req.sweep = sweep_;
    req.metrics = true; // the point counts: a trial is read only when it reported more
    auto r = client_->call<list_reply>(verb::list, req);
    if (!r)
      return failure{"list: " + r.error()};
    std::vector<sweep::trial_job> out;
    for (auto& j : r->jobs) {
      sweep::trial_job t;
      t.id = j.id.str();
      t.trial = j.trial;
      t.state = j.state;
      t.submitted_ms = j.submitted_ms;
      t.params = j.params;
      t.counts = j.metric_counts;
      // A row with metrics but no counts came from a node that does not count them (an
      // older version): its trials are read every round.
      t.counted = j.metrics.empty() || !j.metric_counts.empty();
      out.push_back(std::move(t));
    }
    return out;
  }

  expected<sweep::metric_read> series(const std::string& id, const std::string& metric) override {
    id_request req{id};
    req.metric = metric;
    auto r = client_->call<show_reply>(verb::show, req);
    if (!r)
      return failure{"show " + id + ": " + r.error()};
    sweep::metric_read out;
    out.points = metric_series(*r);
    // The count from the same answer: the points read are at least those it counts.
    auto h = r->metric_history.find(metric);
    out.count = h == r->metric_history.end() ? 0 : h->second.count;
    return out;
  }

  status stop(const std::string& id) override {
    id_request req{id};
    req.stop = true;
    auto r = client_->call<text_reply>(verb::cancel, req);
    if (!r && r.error().find("already ended") == std::string::npos)
      return failure{"stop " + id + ": " + r.error()};
    return {};
  }

private:
  std::string sweep_;
  std::unique_ptr<client> client_;
};

/// Saves the runner's state as the job's checkpoint: the file, then the line.
class state_saver {
public:
  state_saver() {
    dir_ = env_or("MONKEY_CHECKPOINT_DIR");
    step_ = std::atoll(env_or("MONKEY_CHECKPOINT_STEP", "0").c_str());
  }
  std::optional<std::string> load() const {
    if (dir_.empty() || env_or("MONKEY_CHECKPOINT_STEP").empty())
      return std::nullopt;
    std::ifstream in(dir_ + "/sweep-state.json");
    if (!in)
      return std::nullopt;
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  void save(const std::string& state) {
    if (dir_.empty())
      return;
    auto tmp = dir_ + "/.sweep-state.tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << state;
      if (!out)
        return say("cannot write " + tmp);
    }
    std::rename(tmp.c_str(), (dir_ + "/sweep-state.json").c_str());
    std::printf("MONKEY_CHECKPOINT step=%lld\n", static_cast<long long>(++step_));
    std::fflush(stdout);
  }

private:
  std::string dir_;
  int64_t step_ = 0;
};

} // namespace

int run_sweep_drive() {
  auto id = env_or("MONKEY_JOB_ID");
  auto text = env_or("MONKEY_SWEEP_FILE");
  if (id.empty() || text.empty())
    return fail("sweep drive: runs as a sweep's driver job (`monkey sweep start FILE`), "
                "not by hand",
                exit_usage);
  auto spec = sweep::parse_sweep_text(text, env_or("MONKEY_SWEEP_ORIGIN", "sweep"));
  if (!spec)
    return fail(spec.error(), exit_usage);
  auto opt = sweep::make_optimizer(*spec);
  if (!opt)
    return fail("algorithm.name: " + opt.error(), exit_usage);
  std::signal(SIGTERM, on_term);
  std::signal(SIGINT, on_term);
  session_cluster cl(id);
  if (auto ok = cl.connect(); !ok)
    return fail("sweep drive: cannot reach the node: " + ok.error(), 75);
  char cwd[4096] = "";
  if (!::getcwd(cwd, sizeof(cwd)))
    cwd[0] = 0;
  // A shipping sweep's driver runs anywhere; its trials' directory is the one the sweep
  // started in (what they ship), named by `sweep start`.
  auto trial_dir = env_or("MONKEY_SWEEP_WORKDIR", cwd);
  sweep::runner r(*spec, id, trial_dir, std::move(*opt), cl);
  if (auto ship = json::parse(env_or("MONKEY_SWEEP_SHIP", "[]"), nullptr, false); ship.is_array())
    for (auto& b : ship) {
      shipment s;
      s.kind = b.value("kind", "");
      s.source = b.value("source", "");
      s.sha256 = b.value("sha256", "");
      s.bytes = b.value("bytes", uint64_t{0});
      s.files = b.value("files", int64_t{0});
      s.into = b.value("into", "");
      s.cwd = b.value("cwd", "");
      r.ship.push_back(std::move(s));
    }
  state_saver saver;
  if (auto state = saver.load()) {
    if (auto ok = r.restore(*state); !ok)
      return fail("sweep drive: the saved state does not read: " + ok.error(), 1);
    say("going on from the saved state: " + std::to_string(r.trials().size()) + " trials");
  }
  if (auto prov = json::parse(env_or("MONKEY_SWEEP_PROVENANCE", "{}"), nullptr, false);
      prov.is_object())
    for (auto& [k, v] : prov.items())
      if (v.is_string())
        r.provenance[k] = v.get<std::string>();
  r.on_change = [&](const std::string& s) { saver.save(s); };
  r.on_log = say;
  int64_t failing_since = 0;
  auto failing = [&](const std::string& what) {
    auto now = now_ms();
    if (failing_since == 0)
      failing_since = now;
    say(what);
    if (now - failing_since > 30000) {
      say("the node has not answered for 30 s: this attempt ends (the job's next one goes on)");
      std::exit(75);
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
    (void) cl.connect();
  };
  while (true) {
    auto ok = r.reconcile();
    if (ok)
      break;
    failing("reconcile: " + ok.error());
  }
  failing_since = 0;
  int64_t reports = 0;
  std::string last_report;
  bool stopped = false;
  int64_t pause_ms = 100, rounds = 0;
  while (true) {
    if (stop_asked && !stopped) {
      r.stop_all("the sweep was stopped");
      stopped = true;
    }
    ++rounds;
    if (auto ok = r.round(now_ms()); !ok) {
      failing(ok.error());
      continue;
    }
    failing_since = 0;
    auto p = r.where();
    std::string report = "trials_started=" + std::to_string(p.started)
                         + " trials_done=" + std::to_string(p.ended);
    if (p.best) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), " best=%.9g best_trial=%lld", *p.best,
                    static_cast<long long>(p.best_trial));
      report += buf;
    }
    if (report != last_report) {
      std::printf("MONKEY_METRIC step=%lld %s\n", static_cast<long long>(++reports),
                  report.c_str());
      std::fflush(stdout);
      last_report = report;
    }
    if (p.finished) {
      say("finished: " + std::to_string(p.ended) + " trials"
          + (p.best ? ", best " + spec->metric.name + " " + std::to_string(*p.best) + " (trial "
                        + std::to_string(p.best_trial) + ")"
                    : std::string{})
          + (p.stopping.empty() ? "" : "; " + p.stopping) + "; " + std::to_string(rounds)
          + " rounds, trials' points read " + std::to_string(r.reads()) + " times, "
          + std::to_string(r.skipped_reads()) + " reads skipped (nothing new listed)");
      return stopped ? 143 : 0;
    }
    // 0.1 s between rounds while something happens; after quiet rounds twice as long each
    // time, up to half a second (a round costs the cluster a listing on every member, and a read
    // of each trial that reported something new).
    pause_ms = r.quiet() ? std::min<int64_t>(pause_ms * 2, 500) : 100;
    for (int64_t slept = 0; slept < pause_ms && !stop_asked; slept += 50)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

} // namespace monkey::cli
