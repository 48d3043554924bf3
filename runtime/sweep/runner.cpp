// SPDX-License-Identifier: Apache-2.0
#include "runtime/sweep/runner.hpp"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

namespace monkey::sweep {

namespace {

/// A running trial whose listed counts did not move is still read this often.
constexpr int64_t read_at_least_every_ms = 5000;

using json = nlohmann::json;

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

} // namespace

std::optional<double> value_of(const metric_spec& m,
                               const std::vector<std::pair<int64_t, double>>& points) {
  std::optional<double> out;
  for (auto& [step, v] : points) {
    if (!std::isfinite(v))
      continue;
    if (!m.best || !out || (m.maximize ? v > *out : v < *out))
      out = v;
  }
  return out;
}

runner::runner(sweep_spec spec, std::string sweep_id, std::string workdir,
               std::unique_ptr<optimizer> opt, cluster& c)
  : spec_(std::move(spec)), id_(std::move(sweep_id)), workdir_(std::move(workdir)),
    opt_(std::move(opt)), cluster_(c) {}

void runner::log(const std::string& line) const {
  if (on_log)
    on_log(line);
}

void runner::changed() const {
  if (on_change)
    on_change(save());
}

bool runner::better(double a, double b) const {
  return spec_.metric.maximize ? a > b : a < b;
}

std::string runner::key_for(int64_t n, int32_t segment) const {
  auto key = id_ + "-" + std::to_string(n);
  if (segment > 0)
    key += "." + std::to_string(segment);
  return key;
}

job_spec runner::job_for(int64_t n, const assignment& params, int32_t segment,
                         const std::string& from) const {
  job_spec s;
  s.name = spec_.name + "-" + std::to_string(n) + (segment > 0 ? "." + std::to_string(segment) : "");
  auto all = params;
  for (auto& [k, v] : spec_.trial.params)
    all.emplace(k, v);
  if (spec_.trial.app.empty()) {
    std::vector<std::string> names;
    for (auto& p : spec_.space)
      names.push_back(p.name);
    for (auto& [k, v] : spec_.trial.params)
      names.push_back(k);
    s.command = fill(spec_.trial.command, all, names);
  } else {
    s.app = spec_.trial.app;
    s.workers = spec_.trial.workers;
  }
  s.params = all;
  s.cpus = spec_.trial.cpus;
  s.gpus = spec_.trial.gpus;
  s.mem_mb = spec_.trial.mem_mb;
  s.retries = spec_.retries;
  s.workdir = workdir_;
  s.seed = spec_.algorithm.seed * 1000003ull + static_cast<uint64_t>(n);
  s.has_seed = true;
  s.sweep = id_;
  s.trial = static_cast<int32_t>(n);
  s.checkpoint_from = from;
  s.provenance = provenance;
  s.user = user;
  s.host = host;
  s.ship = ship;
  s.env["MONKEY_SWEEP"] = id_;
  s.env["MONKEY_TRIAL"] = std::to_string(n);
  if (spec_.budget.max_t > 0)
    s.env["MONKEY_SWEEP_MAX_T"] = std::to_string(spec_.budget.max_t);
  return s;
}

std::string runner::save() const {
  json rows = json::array();
  for (auto& r : rows_) {
    json j{{"n", r.n},          {"params", r.params}, {"job", r.job},     {"segment", r.segment},
           {"from", r.from},    {"ended", r.ended},  {"end", r.end},       {"why", r.why},     {"seen", r.seen},
           {"steps", r.steps}};
    j["value"] = r.value ? json(*r.value) : json(nullptr);
    rows.push_back(std::move(j));
  }
  return json{{"version", 1},          {"optimizer", opt_->save()}, {"trials", rows},
              {"exhausted", exhausted_}, {"stopping", stopping_},   {"started_ms", started_ms_}}
    .dump();
}

status runner::restore(const std::string& state) {
  auto j = json::parse(state, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return failure{"sweep state: not a JSON object"};
  try {
    if (auto ok = opt_->restore(j.at("optimizer").get<std::string>()); !ok)
      return ok;
    std::vector<trial_row> rows;
    for (auto& t : j.at("trials")) {
      trial_row r;
      r.n = t.at("n").get<int64_t>();
      r.params = t.at("params").get<assignment>();
      r.job = t.at("job").get<std::string>();
      r.segment = t.at("segment").get<int32_t>();
      r.from = t.at("from").get<std::string>();
      r.ended = t.at("ended").get<bool>();
      r.end = t.at("end").get<std::string>();
      r.why = t.at("why").get<std::string>();
      r.seen = t.at("seen").get<int64_t>();
      r.steps = t.at("steps").get<int64_t>();
      if (!t.at("value").is_null())
        r.value = t.at("value").get<double>();
      rows.push_back(std::move(r));
    }
    rows_ = std::move(rows);
    exhausted_ = j.at("exhausted").get<bool>();
    stopping_ = j.at("stopping").get<std::string>();
    started_ms_ = j.at("started_ms").get<int64_t>();
  } catch (const std::exception& e) {
    return failure{std::string("sweep state: ") + e.what()};
  }
  return {};
}

assignment runner::searched(assignment params) const {
  for (auto& [k, v] : spec_.trial.params)
    params.erase(k);
  return params;
}

status runner::reconcile() {
  auto jobs = cluster_.jobs();
  if (!jobs)
    return failure{jobs.error()};
  // Each trial's newest job (a PBT continuation is newer than the job it replaced).
  std::map<int64_t, const trial_job*> newest;
  std::map<int64_t, int> count;
  for (auto& j : *jobs) {
    if (j.trial < 0)
      continue;
    count[j.trial] += 1;
    auto& n = newest[j.trial];
    if (!n || j.submitted_ms > n->submitted_ms || (j.submitted_ms == n->submitted_ms && j.id > n->id))
      n = &j;
  }
  bool any = false;
  for (auto& row : rows_) {
    auto it = newest.find(row.n);
    if (it == newest.end() || it->second->id == row.job || row.ended)
      continue;
    // Started after the saved state: a continuation, or the trial whose submit the state
    // saw begin.
    log("trial " + std::to_string(row.n) + ": goes on with job " + it->second->id
        + " (started after the saved state)");
    row.segment = std::max(row.segment, count[row.n] - 1);
    row.job = it->second->id;
    row.params = searched(it->second->params);
    row.seen = -1;
    opt_->adopt(row.n, row.params);
    any = true;
  }
  // Trials the saved state never saw: suggested and submitted after it. Suggest as many
  // again (the optimizer's count of trials must match) and take the parameters they ran with.
  auto next = static_cast<int64_t>(rows_.size());
  while (newest.count(next)) {
    auto& j = *newest[next];
    auto s = opt_->suggest();
    trial_row row;
    row.n = next;
    row.params = searched(j.params);
    row.job = j.id;
    row.segment = count[next] - 1;
    if (s.what != suggestion::trial || s.params != row.params)
      opt_->adopt(next, row.params);
    log("trial " + std::to_string(next) + ": found in the cluster as job " + j.id
        + " (started after the saved state)");
    rows_.push_back(std::move(row));
    ++next;
    any = true;
  }
  if (any)
    changed();
  return {};
}

bool runner::take_point(trial_row& row, const trial_job& job, int64_t step, double v) {
  row.seen = step;
  row.steps += 1;
  if (!row.why.empty())
    return false;
  auto d = opt_->observe(row.n, step, v);
  if (d == verdict::stop) {
    row.why = "stopped by " + spec_.algorithm.name + " at " + spec_.algorithm.resource + " "
              + std::to_string(step) + " (" + spec_.metric.name + " " + number_text(v) + ")";
    log("trial " + std::to_string(row.n) + ": " + row.why);
    if (!is_final(job.state))
      if (auto ok = cluster_.stop(job.id); !ok)
        log("trial " + std::to_string(row.n) + ": stop: " + ok.error());
    return false;
  }
  if (d != verdict::exploit || d.from < 0 || static_cast<size_t>(d.from) >= rows_.size())
    return false;
  // PBT: this job ends; the trial goes on from the donor's newest checkpoint.
  auto from = rows_[static_cast<size_t>(d.from)].job;
  auto seg = row.segment + 1;
  log("trial " + std::to_string(row.n) + ": exploits trial " + std::to_string(d.from) + " at "
      + spec_.algorithm.resource + " " + std::to_string(step) + ": " + assignment_text(d.params));
  if (!is_final(job.state))
    (void) cluster_.stop(job.id);
  row.params = d.params;
  row.segment = seg;
  row.from = from;
  row.job.clear(); // submitted by the caller; named before it exists
  row.seen = -1;
  return true;
}

void runner::settle(trial_row& row, const trial_job& job,
                    const std::vector<std::pair<int64_t, double>>& points) {
  if (auto value = value_of(spec_.metric, points))
    row.value = value;
  if (!is_final(job.state))
    return;
  row.ended = true;
  row.end = to_string(job.state);
  bool counts = job.state == job_state::succeeded || job.state == job_state::stopped
                || (job.state == job_state::cancelled && !stopping_.empty());
  opt_->finish(row.n, counts ? row.value : std::nullopt);
  log("trial " + std::to_string(row.n) + " ended " + row.end
      + (row.value ? ": " + spec_.metric.name + " " + number_text(*row.value) : std::string{}));
  if (failed_end(row.end) && spec_.max_failed_trials >= 0) {
    auto failed = std::count_if(rows_.begin(), rows_.end(),
                                [](auto& r) { return r.ended && failed_end(r.end); });
    if (failed > spec_.max_failed_trials)
      stop_all(std::to_string(failed) + " trials failed, more than max_failed_trials ("
               + std::to_string(spec_.max_failed_trials) + ")");
  }
}

status runner::start_more() {
  auto running = std::count_if(rows_.begin(), rows_.end(), [](auto& r) { return !r.ended; });
  while (stopping_.empty() && !exhausted_ && running < spec_.parallel
         && (spec_.budget.trials <= 0 || static_cast<int64_t>(rows_.size()) < spec_.budget.trials)) {
    auto s = opt_->suggest();
    if (s.what == suggestion::wait)
      break;
    if (s.what == suggestion::done) {
      exhausted_ = true;
      changed();
      break;
    }
    trial_row row;
    row.n = static_cast<int64_t>(rows_.size());
    row.params = s.params;
    rows_.push_back(row);
    changed(); // saved before it is submitted: never two trials under one number
    auto id = cluster_.submit(job_for(row.n, row.params, 0, ""), key_for(row.n, 0));
    if (!id)
      return failure{id.error()};
    rows_.back().job = *id;
    log("trial " + std::to_string(row.n) + " started as job " + *id + ": "
        + assignment_text(row.params));
    ++running;
  }
  return {};
}

std::vector<std::pair<int64_t, double>>
with_resource(const std::vector<std::pair<int64_t, double>>& points,
              const std::vector<std::pair<int64_t, double>>& resource) {
  std::map<int64_t, double> at(resource.begin(), resource.end());
  std::vector<std::pair<int64_t, double>> out;
  for (auto& [step, v] : points)
    if (auto it = at.find(step); it != at.end() && std::isfinite(it->second))
      out.emplace_back(static_cast<int64_t>(std::llround(it->second)), v);
  std::stable_sort(out.begin(), out.end(),
                   [](auto& a, auto& b) { return a.first < b.first; });
  return out;
}

status runner::round(int64_t now_ms) {
  if (started_ms_ == 0) {
    started_ms_ = now_ms;
    changed();
  }
  // A trial whose submit did not get through (or whose id the state lost): submit again;
  // its key finds the job if it exists.
  for (auto& row : rows_)
    if (!row.ended && row.job.empty()) {
      auto id = cluster_.submit(job_for(row.n, row.params, row.segment, row.from),
                                key_for(row.n, row.segment));
      if (!id)
        return failure{id.error()};
      row.job = *id;
    }
  if (spec_.budget.wall_s > 0 && stopping_.empty()
      && static_cast<double>(now_ms - started_ms_) >= spec_.budget.wall_s * 1000)
    stop_all("the wall budget ran out");
  auto jobs = cluster_.jobs();
  if (!jobs)
    return failure{jobs.error()};
  std::map<std::string, const trial_job*> by_id;
  // What the listing shows of the trials' activity (states and point counts of every key):
  // while it changes the trials are at work, and the driver keeps its quick pace even when
  // none of the points is the sweep's metric (an end soon follows a trial's last report).
  uint64_t activity = 1469598103934665603ull;
  auto mix = [&activity](int64_t v) { activity = (activity ^ static_cast<uint64_t>(v)) * 1099511628211ull; };
  for (auto& j : *jobs) {
    by_id[j.id] = &j;
    mix(static_cast<int64_t>(std::hash<std::string>{}(j.id)));
    mix(static_cast<int64_t>(j.state));
    for (auto& [key, count] : j.counts) {
      mix(static_cast<int64_t>(std::hash<std::string>{}(key)));
      mix(count);
    }
  }
  bool active = activity != activity_;
  // The new points of every followed trial go to the optimizer by step across the trials
  // (then by trial number), as they came about: a driver that fell behind (a busy node, a
  // slow answer, an adoption) decides as it would have live, rather than taking in one
  // trial's whole run before the next trial's first step.
  struct followed {
    trial_row* row;
    const trial_job* job;
    std::vector<std::pair<int64_t, double>> points;
    size_t next = 0;
    bool superseded = false;
    int64_t count = -1, resource_count = -1; ///< the point counts the read answered with
  };
  std::vector<followed> todo;
  for (auto& row : rows_) {
    if (row.ended)
      continue;
    auto it = by_id.find(row.job);
    if (it == by_id.end())
      continue; // submitted, not listed yet
    auto& by = spec_.algorithm.resource_metric;
    // Nothing new since the last read (the listing's counts): no read. A final job is read
    // once more: its last points reach its holders' journals before its final state does.
    // And a running one at least every few seconds: the listing counts the most any member
    // has, a read answers with one member's series, and the two may disagree for a while
    // (a member that missed points while it was thought dead).
    auto listed = [&](const std::string& key) -> int64_t {
      auto& counts = it->second->counts;
      auto c = counts.find(key);
      return c == counts.end() ? 0 : c->second;
    };
    if (!is_final(it->second->state) && row.read_job == row.job && it->second->counted
        && now_ms - row.read_ms < read_at_least_every_ms
        && listed(spec_.metric.name) == row.read_metric
        && (by.empty() || listed(by) == row.read_resource)) {
      ++skipped_;
      continue;
    }
    ++reads_;
    auto points = cluster_.series(row.job, spec_.metric.name);
    if (!points)
      return failure{points.error()};
    int64_t resource_count = -1;
    if (!by.empty()) {
      // Read after the metric: a point reported with its resource in one report has both.
      auto resource = cluster_.series(row.job, by);
      if (!resource)
        return failure{resource.error()};
      points->points = with_resource(points->points, resource->points);
      resource_count = resource->count;
    }
    followed f{&row, it->second, std::move(points->points)};
    f.count = points->count;
    f.resource_count = resource_count;
    while (f.next < f.points.size() && f.points[f.next].first <= row.seen)
      ++f.next;
    todo.push_back(std::move(f));
  }
  bool any = false;
  for (;;) {
    followed* first = nullptr;
    for (auto& f : todo)
      if (!f.superseded && f.next < f.points.size()
          && (!first || f.points[f.next].first < first->points[first->next].first))
        first = &f;
    if (!first)
      break;
    auto [step, v] = first->points[first->next++];
    any = true;
    if (!take_point(*first->row, *first->job, step, v))
      continue;
    // An exploit: the trial goes on as a new job (its later points are the old job's).
    first->superseded = true;
    auto& row = *first->row;
    changed();
    auto id = cluster_.submit(job_for(row.n, row.params, row.segment, row.from),
                              key_for(row.n, row.segment));
    if (!id)
      return failure{id.error()}; // the next round's reconcile finds it, or submits again
    row.job = *id;
  }
  // Every point read was taken in: the reads count as done (a round that failed before this
  // reads the same trials again next time, and what was taken is skipped by its step).
  for (auto& f : todo) {
    f.row->read_job = f.job->id;
    f.row->read_metric = f.count;
    f.row->read_resource = f.resource_count;
    f.row->read_ms = now_ms;
  }
  activity_ = activity;
  for (auto& f : todo)
    if (!f.superseded) {
      auto was = f.row->ended;
      settle(*f.row, *f.job, f.points);
      any = any || was != f.row->ended;
    }
  if (any)
    changed();
  auto before = rows_.size();
  auto ok = start_more();
  quiet_ = !any && !active && rows_.size() == before;
  return ok;
}

void runner::stop_all(const std::string& why) {
  if (stopping_.empty()) {
    stopping_ = why;
    log("sweep: " + why + "; no more trials start, the running ones are stopped");
  }
  for (auto& row : rows_)
    if (!row.ended && !row.job.empty()) {
      if (row.why.empty())
        row.why = "stopped: " + why;
      (void) cluster_.stop(row.job);
    }
  changed();
}

bool failed_end(const std::string& end) {
  return end == "failed" || end == "timed_out" || end == "lost";
}

progress runner::where() const {
  progress p;
  p.budget = spec_.budget.trials;
  p.started = static_cast<int64_t>(rows_.size());
  for (auto& r : rows_) {
    if (r.ended)
      p.ended += 1;
    else
      p.running += 1;
    if (r.ended && failed_end(r.end))
      p.failed += 1;
    if (r.ended && (r.end == "succeeded" || r.end == "stopped"))
      p.good += 1;
    if (r.value && std::isfinite(*r.value) && (!p.best || better(*r.value, *p.best))) {
      p.best = r.value;
      p.best_trial = r.n;
    }
  }
  p.stopping = stopping_;
  bool no_more = exhausted_ || !stopping_.empty()
                 || (spec_.budget.trials > 0 && p.started >= spec_.budget.trials);
  p.finished = no_more && p.running == 0;
  if (spec_.max_failed_trials >= 0 && p.failed > spec_.max_failed_trials)
    p.failure = p.stopping;
  else if (p.finished && p.good == 0 && p.failed > 0)
    p.failure = "no trial succeeded: " + std::to_string(p.failed) + " of "
                + std::to_string(p.ended) + " failed";
  return p;
}

} // namespace monkey::sweep
