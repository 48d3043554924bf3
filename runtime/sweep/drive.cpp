// SPDX-License-Identifier: Apache-2.0
#include "runtime/sweep/drive.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/ids.hpp"
#include "runtime/wire/codec.hpp"

namespace monkey::sweep {

using json = nlohmann::json;

namespace {

template <class Reply, class Request>
expected<Reply> call_verb(const verb_call& call, verb v, const Request& req) {
  auto body = call(v, encode(req));
  if (!body)
    return failure{body.error()};
  return decode<Reply>(*body, to_string(v));
}

std::string value_of(const std::map<std::string, std::string>& env, const char* name,
                     const std::string& fallback = {}) {
  auto it = env.find(name);
  return it == env.end() ? fallback : it->second;
}

std::string wall_clock(int64_t ms) {
  time_t t = ms / 1000;
  struct tm local {};
  localtime_r(&t, &local); // one optimizer actor per sweep, each on a thread of its own
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &local);
  return buf;
}

} // namespace

// ---- the cluster through the verbs ---------------------------------------------------------

expected<std::string> verb_cluster::submit(const job_spec& spec, const std::string& key) {
  submit_request req;
  req.spec = spec;
  req.client_key = key;
  req.retry = true; // the owner looks the key up everywhere before it creates anything
  auto r = call_verb<submit_reply>(call_, verb::submit, req);
  if (!r)
    return failure{"submit: " + r.error()};
  if (r->ids.empty())
    return failure{"submit: no job id in the answer"};
  return r->ids.front().str();
}

expected<std::vector<trial_job>> verb_cluster::jobs() {
  list_request req;
  req.sweep = sweep_;
  req.metrics = true; // the point counts: a trial is read only when it reported more
  auto r = call_verb<list_reply>(call_, verb::list, req);
  if (!r)
    return failure{"list: " + r.error()};
  std::vector<trial_job> out;
  for (auto& j : r->jobs) {
    trial_job t;
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

expected<metric_read> verb_cluster::series(const std::string& id, const std::string& metric) {
  id_request req{id};
  req.metric = metric;
  auto r = call_verb<show_reply>(call_, verb::show, req);
  if (!r)
    return failure{"show " + id + ": " + r.error()};
  metric_read out;
  out.points = newest_series(*r);
  // The count from the same answer: the points read are at least those it counts.
  auto h = r->metric_history.find(metric);
  out.count = h == r->metric_history.end() ? 0 : h->second.count;
  return out;
}

status verb_cluster::stop(const std::string& id) {
  id_request req{id};
  req.stop = true;
  auto r = call_verb<text_reply>(call_, verb::cancel, req);
  if (!r && r.error().find("already ended") == std::string::npos)
    return failure{"stop " + id + ": " + r.error()};
  return {};
}

std::vector<std::pair<int64_t, double>> newest_series(const show_reply& r) {
  int32_t attempt = 0;
  for (auto& p : r.series)
    attempt = std::max(attempt, p.attempt);
  std::vector<std::pair<int64_t, double>> out;
  for (auto& p : r.series)
    if (p.rank == 0 && p.attempt == attempt)
      out.push_back({p.step, p.value});
  std::stable_sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.first < b.first; });
  return out;
}

// ---- the driver ----------------------------------------------------------------------------

driver::driver(sweep_spec spec, std::string id, std::string trial_dir,
               std::unique_ptr<optimizer> opt, verb_call call, sinks out)
    : spec_(std::move(spec)), cluster_(id, std::move(call)), sinks_(std::move(out)) {
  runner_ = std::make_unique<runner>(spec_, std::move(id), std::move(trial_dir), std::move(opt),
                                     cluster_);
}

expected<std::unique_ptr<driver>> driver::from_env(const std::map<std::string, std::string>& env,
                                                   const std::string& workdir, verb_call call,
                                                   sinks out) {
  auto id = value_of(env, "MONKEY_JOB_ID");
  auto text = value_of(env, "MONKEY_SWEEP_FILE");
  if (id.empty() || text.empty())
    return failure{"the sweep's driver job has no MONKEY_JOB_ID or MONKEY_SWEEP_FILE: it is "
                   "started by `monkey sweep start FILE`"};
  auto spec = parse_sweep_text(text, value_of(env, "MONKEY_SWEEP_ORIGIN", "sweep"));
  if (!spec)
    return failure{spec.error()};
  auto opt = make_optimizer(*spec);
  if (!opt)
    return failure{"algorithm.name: " + opt.error()};
  // A shipping sweep's driver runs anywhere; its trials' directory is the one the sweep
  // started in (what they ship), named by `sweep start`.
  auto trial_dir = value_of(env, "MONKEY_SWEEP_WORKDIR", workdir);
  std::unique_ptr<driver> d(
    new driver(*spec, id, trial_dir, std::move(*opt), std::move(call), std::move(out)));
  auto& r = *d->runner_;
  if (auto ship = json::parse(value_of(env, "MONKEY_SWEEP_SHIP", "[]"), nullptr, false);
      ship.is_array())
    for (auto& b : ship) {
      if (!b.is_object())
        continue;
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
  if (auto prov = json::parse(value_of(env, "MONKEY_SWEEP_PROVENANCE", "{}"), nullptr, false);
      prov.is_object())
    for (auto& [k, v] : prov.items())
      if (v.is_string())
        r.provenance[k] = v.get<std::string>();
  r.user = value_of(env, "MONKEY_SWEEP_USER");
  r.host = value_of(env, "MONKEY_SWEEP_HOST");
  d->ckpt_dir_ = value_of(env, "MONKEY_CHECKPOINT_DIR");
  auto step = value_of(env, "MONKEY_CHECKPOINT_STEP");
  if (!d->ckpt_dir_.empty() && !step.empty()) {
    d->ckpt_step_ = std::atoll(step.c_str());
    std::ifstream in(d->ckpt_dir_ + "/sweep-state.json");
    if (in) {
      std::stringstream ss;
      ss << in.rdbuf();
      if (auto ok = r.restore(ss.str()); !ok)
        return failure{"the saved state does not read: " + ok.error()};
      d->say("going on from the saved state: " + std::to_string(r.trials().size()) + " trials");
    }
  }
  auto* self = d.get();
  r.on_change = [self](const std::string& s) { self->save(s); };
  r.on_log = [self](const std::string& line) { self->say(line); };
  return d;
}

void driver::say(const std::string& line) const {
  if (sinks_.log)
    sinks_.log(wall_clock(now_ms()) + " sweep: " + line);
}

/// The runner's state as the job's checkpoint: the file, then the line that saves it.
void driver::save(const std::string& state) {
  if (ckpt_dir_.empty())
    return;
  auto tmp = ckpt_dir_ + "/.sweep-state.tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << state;
    if (!out)
      return say("cannot write " + tmp);
  }
  std::rename(tmp.c_str(), (ckpt_dir_ + "/sweep-state.json").c_str());
  if (sinks_.out)
    sinks_.out("MONKEY_CHECKPOINT step=" + std::to_string(++ckpt_step_));
}

drive_next driver::failing(int64_t now, const std::string& what) {
  if (failing_since_ == 0)
    failing_since_ = now;
  say(what);
  drive_next n;
  if (now - failing_since_ > 30000) {
    say("the cluster has not answered for 30 s: this attempt ends (the job's next one goes on)");
    n.done = true;
    n.code = 75;
    return n;
  }
  n.pause_ms = 1000;
  return n;
}

drive_next driver::tick(int64_t now) {
  auto& r = *runner_;
  if (!reconciled_) {
    if (auto ok = r.reconcile(); !ok)
      return failing(now, "reconcile: " + ok.error());
    reconciled_ = true;
    failing_since_ = 0;
  }
  if (stop_asked_ && !stopped_) {
    r.stop_all("the sweep was stopped");
    stopped_ = true;
  }
  ++rounds_;
  if (auto ok = r.round(now); !ok)
    return failing(now, ok.error());
  failing_since_ = 0;
  auto p = r.where();
  std::string report = "trials_started=" + std::to_string(p.started)
                       + " trials_done=" + std::to_string(p.ended)
                       + " trials_failed=" + std::to_string(p.failed);
  if (p.best) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), " best=%.9g best_trial=%lld", *p.best,
                  static_cast<long long>(p.best_trial));
    report += buf;
  }
  if (report != last_report_) {
    if (sinks_.out)
      sinks_.out("MONKEY_METRIC step=" + std::to_string(++reports_) + " " + report);
    last_report_ = report;
  }
  drive_next n;
  if (p.finished) {
    say("finished: " + std::to_string(p.ended) + " trials"
        + (p.best ? ", best " + spec_.metric.name + " " + std::to_string(*p.best) + " (trial "
                      + std::to_string(p.best_trial) + ")"
                  : std::string{})
        + (p.stopping.empty() ? "" : "; " + p.stopping) + "; " + std::to_string(rounds_)
        + " rounds, trials' points read " + std::to_string(r.reads()) + " times, "
        + std::to_string(r.skipped_reads()) + " reads skipped (nothing new listed)");
    n.done = true;
    n.code = stopped_ ? 143 : 0;
    if (!stopped_ && !p.failure.empty()) {
      say("the sweep failed: " + p.failure);
      n.code = sweep_failed_exit; // the driver's job fails, not retried; --wait exits non-zero
    }
    return n;
  }
  // 0.1 s between rounds while something happens; after quiet rounds twice as long each
  // time, up to half a second (a round costs the cluster a listing on every member, and a
  // read of each trial that reported something new).
  pause_ms_ = r.quiet() ? std::min<int64_t>(pause_ms_ * 2, 500) : 100;
  n.pause_ms = pause_ms_;
  return n;
}

} // namespace monkey::sweep
