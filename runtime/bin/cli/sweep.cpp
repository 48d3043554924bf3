// SPDX-License-Identifier: Apache-2.0
// monkey sweep check|start|list|status|best|stop (docs/sweeps.md): reads a sweep file the way
// its driver will (a bad file gets the error naming its line and field before anything
// runs), starts it as a driver job that runs its trials as ordinary jobs, and shows and
// stops running sweeps. The driver's attempts run inside the nodes
// (actors/sweep/sweep_actor.hpp, runtime/sweep/drive.hpp).
#include "runtime/bin/cli/cli.hpp"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <unistd.h>

#include "runtime/provenance.hpp"
#include "runtime/sweep/optimizer.hpp"
#include "runtime/sweep/runner.hpp"
namespace monkey::cli {

namespace {

/// How a trial runs, as a person would type it.
std::string trial_line(const sweep::sweep_spec& s, const sweep::assignment& a) {
  std::string line;
  if (!s.trial.app.empty()) {
    line = "monkey submit --app " + s.trial.app + " --workers " + std::to_string(s.trial.workers);
    for (auto& [k, v] : s.trial.params)
      line += " --set " + k + "=" + v;
    for (auto& [k, v] : a)
      line += " --set " + k + "=" + v;
    return line;
  }
  std::vector<std::string> names;
  for (auto& p : s.space)
    names.push_back(p.name);
  for (auto& [k, v] : s.trial.params)
    names.push_back(k);
  auto all = a;
  for (auto& [k, v] : s.trial.params)
    all.emplace(k, v);
  for (auto& arg : sweep::fill(s.trial.command, all, names))
    line += (line.empty() ? "" : " ") + arg;
  return line;
}

int check_sweep(context& ctx, const std::string& path, int count) {
  auto spec = sweep::parse_sweep_file(path);
  if (!spec)
    return fail(spec.error(), exit_usage);
  auto opt = sweep::make_optimizer(*spec);
  if (!opt)
    return fail(path + ": algorithm.name: " + opt.error(), exit_usage);
  std::vector<sweep::assignment> first;
  for (int k = 0; k < count; ++k) {
    auto next = (*opt)->suggest();
    if (next.what != sweep::suggestion::trial)
      break;
    first.push_back(next.params);
  }
  if (ctx.g.json) {
    json trials = json::array();
    for (auto& a : first)
      trials.push_back({{"params", a}, {"run", trial_line(*spec, a)}});
    json out = {{"name", spec->name},
                {"algorithm", spec->algorithm.name},
                {"seed", spec->algorithm.seed},
                {"metric", spec->metric.name},
                {"goal", spec->metric.maximize ? "maximize" : "minimize"},
                {"trials", spec->budget.trials},
                {"parallel", spec->parallel},
                {"first_trials", trials}};
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("sweep %s: %s (seed %llu), %s %s, %lld trials%s, %d in parallel\n",
              spec->name.c_str(), spec->algorithm.name.c_str(),
              static_cast<unsigned long long>(spec->algorithm.seed),
              spec->metric.maximize ? "maximize" : "minimize",
              spec->metric.name.c_str(), static_cast<long long>(spec->budget.trials),
              spec->budget.wall_s > 0
                ? (", at most " + std::to_string(static_cast<long long>(spec->budget.wall_s))
                   + " s").c_str()
                : "",
              spec->parallel);
  for (auto& p : spec->space) {
    std::string cond;
    for (auto& [other, vals] : p.when) {
      cond += (cond.empty() ? " when " : " and ") + other + " in {";
      for (size_t i = 0; i < vals.size(); ++i)
        cond += (i ? ", " : "") + vals[i];
      cond += "}";
    }
    std::string range = p.values.empty()
                          ? "[" + sweep::value_text(p.low) + ", " + sweep::value_text(p.high) + "]"
                          : std::to_string(p.values.size()) + " values";
    std::printf("  %-16s %-10s %s%s\n", p.name.c_str(), sweep::to_string(p.type),
                range.c_str(), cond.c_str());
  }
  // The drawn values first: a script that reads them from MONKEY_PARAM_* (no placeholder in
  // its command) shows nothing of them in its command line.
  std::printf("first trials:\n");
  for (size_t i = 0; i < first.size(); ++i) {
    std::string drawn;
    for (auto& [k, v] : first[i])
      drawn += (drawn.empty() ? "" : " ") + k + "=" + v;
    std::printf("  %zu: %s\n     %s\n", i, drawn.empty() ? "(no parameters)" : drawn.c_str(),
                trial_line(*spec, first[i]).c_str());
  }
  return 0;
}

/// A sweep file's text and what it says (the file is read, then parsed, once).
struct sweep_file {
  std::string text;
  sweep::sweep_spec spec;
};

expected<sweep_file> read_sweep(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  if (!(in && ss << in.rdbuf())) { // its error as `check` words it
    auto spec = sweep::parse_sweep_file(path);
    return failure{spec ? path + ": cannot read the sweep file" : spec.error()};
  }
  auto text = ss.str();
  if (text.size() > 64 * 1024)
    return failure{path + ": a sweep file to start is at most 64 KiB"};
  auto spec = sweep::parse_sweep_text(text, path);
  if (!spec)
    return failure{spec.error()};
  return sweep_file{std::move(text), *spec};
}

/// The sweep a driver job runs: its record, and the sweep file it carries.
struct sweep_view {
  job_record driver;
  sweep::sweep_spec spec;
  std::vector<job_summary> trials; ///< by trial number, then submit time
};

expected<sweep_view> load_sweep(client& c, const std::string& id) {
  auto s = c.call<show_reply>(verb::show, id_request{id});
  if (!s)
    return failure{s.error()};
  auto& rec = s->record;
  auto file = rec.spec.env.find("MONKEY_SWEEP_FILE");
  if (!rec.spec.driver || file == rec.spec.env.end())
    return failure{"job " + rec.id.short_str() + " is not a sweep (monkey sweep list shows them)"};
  auto origin = rec.spec.env.count("MONKEY_SWEEP_ORIGIN") ? rec.spec.env.at("MONKEY_SWEEP_ORIGIN")
                                                          : std::string("sweep");
  auto spec = sweep::parse_sweep_text(file->second, origin);
  if (!spec)
    return failure{spec.error()};
  list_request req;
  req.sweep = rec.id.str();
  req.metrics = true;
  auto l = c.call<list_reply>(verb::list, req);
  if (!l)
    return failure{l.error()};
  auto trials = l->jobs;
  std::stable_sort(trials.begin(), trials.end(), [](auto& a, auto& b) {
    return a.trial != b.trial ? a.trial < b.trial : a.submitted_ms < b.submitted_ms;
  });
  return sweep_view{rec, *spec, std::move(trials)};
}

/// A trial's row: its newest job, the last and the best value of the metric.
struct trial_line_view {
  int32_t n = -1;
  const job_summary* job = nullptr;
  int segments = 0;
  std::optional<double> last, best, value;
};

/// The points of ended jobs, which no longer change (`start --wait` asks every round).
using series_cache = std::map<std::string, std::vector<std::pair<int64_t, double>>>;

std::vector<trial_line_view> trial_rows(client& c, const sweep_view& v,
                                        series_cache* ended = nullptr) {
  std::vector<trial_line_view> rows;
  for (auto& j : v.trials) {
    if (rows.empty() || rows.back().n != j.trial)
      rows.push_back({j.trial, &j, 0, {}, {}, {}});
    rows.back().job = &j;
    rows.back().segments += 1;
  }
  for (auto& r : rows) {
    auto id = r.job->id.str();
    std::vector<std::pair<int64_t, double>> pts;
    if (auto hit = ended ? ended->find(id) : series_cache::iterator{};
        ended && hit != ended->end()) {
      pts = hit->second;
    } else {
      auto got = metric_series(c, id, v.spec.metric.name);
      if (!got)
        continue;
      pts = std::move(*got);
      if (ended && is_final(r.job->state))
        (*ended)[id] = pts;
    }
    auto m = v.spec.metric;
    m.best = false;
    r.last = sweep::value_of(m, pts);
    m.best = true;
    r.best = sweep::value_of(m, pts);
    r.value = v.spec.metric.best ? r.best : r.last;
  }
  return rows;
}

/// A trial's parameters without the sweep's fixed ones (trial.params): what was searched.
sweep::assignment searched(const sweep_view& v, const job_summary& j) {
  sweep::assignment a;
  for (auto& [k, val] : j.params)
    if (!v.spec.trial.params.count(k))
      a[k] = val;
  return a;
}

std::string num(std::optional<double> v) {
  if (!v)
    return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", *v);
  return buf;
}

const trial_line_view* best_of(const sweep_view& v, const std::vector<trial_line_view>& rows) {
  const trial_line_view* best = nullptr;
  for (auto& r : rows)
    if (r.value && (!best || (v.spec.metric.maximize ? *r.value > *best->value
                                                      : *r.value < *best->value)))
      best = &r;
  return best;
}

/// A trial whose (newest) job failed, timed out or was lost.
bool trial_failed(const job_summary& j) {
  return j.state == job_state::failed || j.state == job_state::timed_out
         || j.state == job_state::lost;
}

/// "trial 0 (job …) failed: attempt 1: exit 2", then the last lines of its stderr.
std::string failure_text(client& c, const trial_line_view& r) {
  std::string out = "trial " + std::to_string(r.n) + " (job " + r.job->id.short_str() + ") "
                    + to_string(r.job->state) + ": " + r.job->reason;
  logs_request req;
  req.id = r.job->id.str();
  req.stream = "err";
  req.max_bytes = 1 << 20;
  auto l = c.call<logs_reply>(verb::logs, req);
  if (!l || l->data.empty())
    return out;
  std::vector<std::string> lines;
  std::istringstream in(l->data);
  for (std::string line; std::getline(in, line);)
    if (!line.empty())
      lines.push_back(line);
  out += "; its stderr ends:";
  for (size_t i = lines.size() > 5 ? lines.size() - 5 : 0; i < lines.size(); ++i)
    out += "\n    " + lines[i];
  return out;
}

/// Why a sweep whose driver failed failed: its driver's line "the sweep failed: …" (the
/// driver's stderr), else the driver job's reason.
std::string sweep_failure(client& c, const job_record& driver) {
  logs_request req;
  req.id = driver.id.str();
  req.stream = "err";
  req.max_bytes = 1 << 20;
  if (auto l = c.call<logs_reply>(verb::logs, req)) {
    auto at = l->data.rfind("the sweep failed: ");
    if (at != std::string::npos)
      return l->data.substr(at, l->data.find('\n', at) - at);
  }
  return driver.reason;
}

/// "[########............] 8/20 trials, 2 running, 1 failed, best accuracy 0.871 (trial 5)".
std::string progress_line(const sweep_view& v, const std::vector<trial_line_view>& rows) {
  int64_t done = 0, running = 0, failed = 0;
  for (auto& r : rows) {
    (is_final(r.job->state) ? done : running) += 1;
    failed += trial_failed(*r.job) ? 1 : 0;
  }
  auto budget = v.spec.budget.trials > 0 ? v.spec.budget.trials
                                          : std::max<int64_t>(1, static_cast<int64_t>(rows.size()));
  constexpr int width = 24;
  auto filled = static_cast<int>(width * std::min<int64_t>(done, budget) / budget);
  std::string bar = "[" + std::string(static_cast<size_t>(filled), '#')
                    + std::string(static_cast<size_t>(width - filled), '.') + "] ";
  bar += std::to_string(done) + "/" + std::to_string(budget) + " trials";
  if (running > 0)
    bar += ", " + std::to_string(running) + " running";
  if (failed > 0)
    bar += ", " + std::to_string(failed) + " failed";
  if (auto* b = best_of(v, rows))
    bar += ", best " + v.spec.metric.name + " " + num(b->value) + " (trial "
           + std::to_string(b->n) + ")";
  return bar;
}

json rows_json(const sweep_view& v, const std::vector<trial_line_view>& rows) {
  json out = json::array();
  for (auto& r : rows) {
    out.push_back({{"trial", r.n},
                   {"job", r.job->id.str()},
                   {"state", to_string(r.job->state)},
                   {"jobs", r.segments},
                   {"params", searched(v, *r.job)},
                   {"last", r.last ? json(*r.last) : json(nullptr)},
                   {"best", r.best ? json(*r.best) : json(nullptr)}});
  }
  return out;
}

std::string params_text(const sweep_view& v, const job_summary& j) {
  return sweep::assignment_text(searched(v, j));
}


/// What changed about where the sweep's driver runs since the last look ("" when nothing):
/// its attempt ended with the driver not final ("the sweep's driver on n2 ended lost (...)"),
/// or a new attempt runs ("moved from n2 to n1"). Names are asked again for a new node.
std::string driver_moves(const sweep_view& v, int32_t& seen_attempt, bool& told_end,
                         std::map<std::string, std::string>& names, context& ctx) {
  auto& atts = v.driver.attempts;
  if (atts.empty())
    return {};
  auto name = [&](const attempt_record& a) {
    auto node = a.id.node.str();
    if (!names.count(node))
      names = node_names(ctx);
    return name_of(names, node);
  };
  auto& a = atts.back();
  if (a.number > seen_attempt) {
    bool first_look = seen_attempt == 0;
    seen_attempt = a.number;
    told_end = false;
    if (first_look || atts.size() < 2)
      return {};
    auto& prev = atts[atts.size() - 2];
    auto from = name(prev), to = name(a);
    return "the sweep's driver " + (from == to ? "runs again on " + to : "moved from " + from
                                                                           + " to " + to)
           + " (attempt " + std::to_string(a.number) + "; attempt "
           + std::to_string(prev.number) + " ended " + prev.outcome
           + (prev.cause.empty() ? std::string() : ": " + prev.cause)
           + "): it goes on from its saved state";
  }
  if (a.outcome != "running" && !is_final(v.driver.state) && !told_end) {
    told_end = true;
    return "the sweep's driver on " + name(a) + " ended " + a.outcome
           + (a.cause.empty() ? std::string() : " (" + a.cause + ")")
           + ": it runs again where a node can take it";
  }
  return {};
}

int start_sweep(context& ctx, const std::string& path, bool wait) {
  auto file = read_sweep(path);
  if (!file)
    return fail(file.error(), exit_usage);
  if (auto opt = sweep::make_optimizer(file->spec); !opt)
    return fail(path + ": algorithm.name: " + opt.error(), exit_usage);
  job_spec spec;
  spec.name = "sweep:" + file->spec.name;
  spec.command = {"sweep", file->spec.name}; // run by the node's optimizer actor, not exec'd
  spec.driver = true;
  spec.cpus = 0; // the driver holds no slot: its trials do
  spec.retries = 20;
  spec.retry_backoff_s = 1;
  spec.retry_backoff_max_s = 10;
  spec.max_requeues = 50;
  spec.env["MONKEY_SWEEP_FILE"] = file->text;
  auto slash = path.find_last_of('/');
  spec.env["MONKEY_SWEEP_ORIGIN"] = slash == std::string::npos ? path : path.substr(slash + 1);
  char cwd[4096];
  if (::getcwd(cwd, sizeof(cwd)))
    spec.workdir = cwd;
  // App trials need nothing shipped: the app is installed on each node.
  bool ships = file->spec.ship && !file->spec.trial.command.empty();
  if (ships) {
    // The trials run in a copy of this directory wherever they are placed; the driver
    // needs none of it (docs/shipping.md).
    ship_request what;
    what.workdir = true;
    what.data = file->spec.data;
    auto shipped = ship_files(ctx, spec.workdir, what);
    if (!shipped)
      return fail("sweep start: " + shipped.error() + " (`ship: false` in the sweep file runs "
                  "the trials in this directory, which every node must then share)");
    json bundles = json::array();
    for (auto& b : *shipped)
      bundles.push_back({{"kind", b.kind}, {"source", b.source}, {"sha256", b.sha256},
                         {"bytes", b.bytes}, {"files", b.files}, {"into", b.into},
                         {"cwd", b.cwd}});
    spec.env["MONKEY_SWEEP_SHIP"] = bundles.dump();
    spec.env["MONKEY_SWEEP_WORKDIR"] = spec.workdir;
  }
  auto trial_dir = spec.workdir;
  if (ships)
    spec.workdir = "/";
  spec.user = current_user();
  spec.host = current_host();
  spec.env["MONKEY_SWEEP_USER"] = spec.user; // the trials record them too
  spec.env["MONKEY_SWEEP_HOST"] = spec.host;
  // What every trial records to be run again (`monkey reproduce`): the code the sweep
  // started from, on this machine.
  std::vector<std::string> trial_cmd = file->spec.trial.command;
  spec.provenance = job_provenance(ctx, trial_dir, trial_cmd);
  spec.env["MONKEY_SWEEP_PROVENANCE"] = json(spec.provenance).dump();
  if (auto problem = validate(spec); !problem)
    return fail("invalid sweep job: " + problem.error(), exit_usage);
  auto c = ctx.connect();
  if (!c)
    return fail(c.error());
  submit_request req;
  req.spec = spec;
  req.client_key = random_key();
  auto r = (*c)->call<submit_reply>(verb::submit, req);
  if (!r || r->ids.empty())
    return fail("sweep start: " + (r ? std::string("no id in the answer") : r.error()));
  auto id = r->ids.front().str();
  if (ctx.g.json && !wait) {
    std::cout << json{{"id", id}, {"name", file->spec.name}}.dump() << "\n";
    return 0;
  }
  std::cout << id << "\n";
  std::cout.flush();
  if (!wait)
    return 0;
  bool tty = ::isatty(STDERR_FILENO);
  std::string last;
  series_cache ended;
  bool told_failure = false;
  // The wait follows the sweep through the cluster: when the node it talks to stops
  // answering, another member does; when the driver moves, it says where and why.
  std::vector<std::string> addresses;
  if (auto n = (*c)->call<nodes_reply>(verb::nodes, std::string{}))
    for (auto& m : n->members)
      addresses.push_back(m.address);
  auto names = node_names(ctx);
  int32_t seen_attempt = 0;
  bool told_end = false;
  int moves_left = 16;
  for (;;) {
    auto v = load_sweep(**c, id);
    if (!v) {
      std::vector<std::string> others;
      for (auto& a : addresses)
        if (a != (*c)->address())
          others.push_back(a);
      auto gone = (*c)->address();
      auto again = others.empty() || --moves_left < 0
                     ? expected<client*>(failure{"no other member to ask"})
                     : ctx.reconnect(others);
      if (!again)
        return fail("sweep " + id + ": " + v.error() + " (" + again.error() + ")");
      c = again;
      std::fprintf(stderr, "%smonkey: %s does not answer (%s): following the sweep through %s\n",
                   tty ? "\r\033[K" : "", gone.c_str(), v.error().c_str(),
                   (*c)->address().c_str());
      last.clear();
      continue;
    }
    if (auto said = driver_moves(*v, seen_attempt, told_end, names, ctx); !said.empty()) {
      std::fprintf(stderr, "%smonkey: %s\n", tty ? "\r\033[K" : "", said.c_str());
      last.clear();
    }
    auto rows = trial_rows(**c, *v, &ended);
    if (!told_failure)
      for (auto& r : rows)
        if (trial_failed(*r.job)) {
          // The first failure at once, with its cause: a sweep of a broken script says so
          // after its first trial, not after its budget.
          std::fprintf(stderr, "%smonkey: %s\n", tty ? "\r\033[K" : "",
                       failure_text(**c, r).c_str());
          told_failure = true;
          last.clear();
          break;
        }
    auto line = progress_line(*v, rows);
    if (line != last) {
      std::fprintf(stderr, tty ? "\r%s\033[K" : "%s\n", line.c_str());
      std::fflush(stderr);
      last = line;
    }
    if (is_final(v->driver.state)) {
      if (tty)
        std::fprintf(stderr, "\n");
      std::fprintf(stderr, "monkey: sweep %s %s — %s\n", id.c_str(), to_string(v->driver.state),
                   v->driver.state == job_state::failed ? sweep_failure(**c, v->driver).c_str()
                                                        : v->driver.reason.c_str());
      if (auto* b = best_of(*v, rows))
        std::fprintf(stderr, "best: trial %d (job %s) %s %s: %s\n", b->n,
                     b->job->id.short_str().c_str(), v->spec.metric.name.c_str(),
                     num(b->value).c_str(), params_text(*v, *b->job).c_str());
      if (ctx.g.json)
        std::cout << json{{"id", id}, {"state", to_string(v->driver.state)},
                          {"trials", rows_json(*v, rows)}}.dump() << "\n";
      return exit_code_of(v->driver);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

int list_sweeps(context& ctx) {
  auto c = ctx.connect();
  if (!c)
    return fail(c.error());
  list_request req;
  req.metrics = true;
  auto r = (*c)->call<list_reply>(verb::list, req);
  if (!r)
    return fail("sweep list: " + r.error());
  json out = json::array();
  if (!ctx.g.json)
    std::printf("%-10s  %-20s  %-10s  %7s  %7s  %s\n", "ID", "NAME", "STATE", "STARTED", "DONE",
                "BEST");
  for (auto& j : r->jobs) {
    if (!j.driver)
      continue;
    auto metric = [&](const char* k) -> std::optional<double> {
      auto it = j.metrics.find(k);
      return it == j.metrics.end() ? std::nullopt : std::optional<double>(it->second);
    };
    auto name = j.name.rfind("sweep:", 0) == 0 ? j.name.substr(6) : j.name;
    if (ctx.g.json) {
      out.push_back({{"id", j.id.str()},
                     {"name", name},
                     {"state", to_string(j.state)},
                     {"trials_started", metric("trials_started").value_or(0)},
                     {"trials_done", metric("trials_done").value_or(0)},
                     {"best", metric("best") ? json(*metric("best")) : json(nullptr)}});
      continue;
    }
    std::printf("%-10s  %-20s  %-10s  %7s  %7s  %s\n", j.id.short_str().c_str(), name.c_str(),
                to_string(j.state), num(metric("trials_started").value_or(0)).c_str(),
                num(metric("trials_done").value_or(0)).c_str(), num(metric("best")).c_str());
  }
  if (ctx.g.json)
    std::cout << out.dump(2) << "\n";
  return 0;
}

/// The connection and the sweep `id` names, or the failure to print.
expected<std::pair<client*, sweep_view>> open_sweep(context& ctx, const std::string& id) {
  auto c = ctx.connect();
  if (!c)
    return failure{c.error()};
  auto v = load_sweep(**c, id);
  if (!v)
    return failure{"sweep " + id + ": " + v.error()};
  return std::make_pair(*c, std::move(*v));
}

int status_sweep(context& ctx, const std::string& id, bool best_only) {
  auto open = open_sweep(ctx, id);
  if (!open)
    return fail(open.error());
  auto* c = &open->first;
  auto* v = &open->second;
  auto rows = trial_rows(**c, *v);
  auto* best = best_of(*v, rows);
  if (best_only) {
    if (!best)
      return fail("sweep " + v->driver.id.short_str() + ": no trial has a value of "
                  + v->spec.metric.name + " yet");
    auto a = searched(*v, *best->job);
    // The trial's own record: its every parameter (searched and fixed) and its seed.
    auto rec = (*c)->call<show_reply>(verb::show, id_request{best->job->id.str()});
    if (!rec)
      return fail("sweep " + v->driver.id.short_str() + ": trial " + std::to_string(best->n)
                  + " (job " + best->job->id.short_str() + "): " + rec.error());
    auto again = submit_line(rec->record.spec);
    if (ctx.g.json) {
      std::cout << json{{"trial", best->n},          {"job", best->job->id.str()},
                        {"value", *best->value},     {"metric", v->spec.metric.name},
                        {"params", a},               {"command", again},
                        {"reproduce", "monkey reproduce " + best->job->id.str()}}
                     .dump(2)
                << "\n";
      return 0;
    }
    std::printf("best trial %d (job %s): %s %s\n  %s\nrun it again:\n  %s\nor exactly as it "
                "ran (its seed%s):\n  monkey reproduce %s\n",
                best->n, best->job->id.short_str().c_str(), v->spec.metric.name.c_str(),
                num(best->value).c_str(), sweep::assignment_text(a).c_str(), again.c_str(),
                v->spec.ship && v->spec.trial.app.empty() ? ", its shipped directory" : "",
                best->job->id.str().c_str());
    return 0;
  }
  if (ctx.g.json) {
    json out{{"id", v->driver.id.str()},
             {"name", v->spec.name},
             {"state", to_string(v->driver.state)},
             {"algorithm", v->spec.algorithm.name},
             {"metric", v->spec.metric.name},
             {"goal", v->spec.metric.maximize ? "maximize" : "minimize"},
             {"budget", v->spec.budget.trials},
             {"failed", std::count_if(rows.begin(), rows.end(),
                                      [](auto& r) { return trial_failed(*r.job); })},
             {"reason", v->driver.state == job_state::failed ? sweep_failure(**c, v->driver)
                                                              : v->driver.reason},
             {"trials", rows_json(*v, rows)}};
    if (best)
      out["best"] = {{"trial", best->n}, {"value", *best->value}};
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::printf("sweep %s (%s): %s, %s %s %s\n%s\n", v->spec.name.c_str(),
              v->driver.id.short_str().c_str(), to_string(v->driver.state),
              v->spec.algorithm.name.c_str(), v->spec.metric.maximize ? "maximize" : "minimize",
              v->spec.metric.name.c_str(), progress_line(*v, rows).c_str());
  if (v->driver.state == job_state::failed)
    std::printf("%s\n", sweep_failure(**c, v->driver).c_str());
  std::printf("%5s  %-10s  %-9s  %10s  %10s  %s\n", "TRIAL", "JOB", "STATE", "LAST", "BEST",
              "PARAMS");
  for (auto& r : rows)
    std::printf("%5d  %-10s  %-9s  %10s  %10s  %s%s\n", r.n, r.job->id.short_str().c_str(),
                to_string(r.job->state), num(r.last).c_str(), num(r.best).c_str(),
                params_text(*v, *r.job).c_str(),
                r.segments > 1 ? (" (" + std::to_string(r.segments) + " jobs)").c_str() : "");
  return 0;
}

int stop_sweep(context& ctx, const std::string& id) {
  auto open = open_sweep(ctx, id);
  if (!open)
    return fail(open.error());
  auto* c = &open->first;
  auto* v = &open->second;
  auto r = (*c)->call<text_reply>(verb::cancel, id_request{v->driver.id.str()});
  if (!r)
    return fail("sweep stop: " + r.error());
  std::printf("stopping sweep %s: its driver stops the running trials (they end stopped) and "
              "starts no more\n",
              v->driver.id.short_str().c_str());
  return 0;
}

} // namespace

verb_def add_sweep(CLI::App& app) {
  struct opts {
    std::string file, id;
    int count = 5;
    bool wait = false;
  };
  auto o = std::make_shared<opts>();
  auto* s = app.add_subcommand("sweep", "hyperparameter sweeps (docs/sweeps.md): check, start, "
                                        "list, status, best, stop");
  auto* check = s->add_subcommand("check", "read a sweep file and show the first trials its "
                                           "algorithm would start");
  check->add_option("FILE", o->file, "the sweep file (YAML or JSON)")->required();
  check->add_option("--trials", o->count, "how many trials to show")->capture_default_str();
  auto* start = s->add_subcommand("start", "start a sweep: its driver runs the trials as jobs "
                                           "anywhere in the cluster; prints the sweep's id");
  start->add_option("FILE", o->file, "the sweep file (YAML or JSON)")->required();
  start->add_flag("--wait", o->wait, "follow it with a progress bar until it ends; exits as "
                                     "its driver job did (0: finished)");
  auto* list = s->add_subcommand("list", "every sweep: state, trials started and done, best");
  auto* status = s->add_subcommand("status", "a sweep's trials: state, parameters, last and "
                                             "best value of the metric; the best so far");
  status->add_option("ID", o->id, "the sweep (its id, or a unique suffix)")->required();
  auto* best = s->add_subcommand("best", "a sweep's best trial: its parameters, the command "
                                         "that runs it again, and the `monkey reproduce` "
                                         "that repeats it exactly");
  best->add_option("ID", o->id, "the sweep")->required();
  auto* stop = s->add_subcommand("stop", "stop a sweep: its running trials end stopped, no "
                                         "more start");
  stop->add_option("ID", o->id, "the sweep")->required();
  s->require_subcommand(1);
  return {s,
          [=](context& ctx) {
            if (check->parsed())
              return check_sweep(ctx, o->file, o->count);
            if (start->parsed())
              return start_sweep(ctx, o->file, o->wait);
            if (list->parsed())
              return list_sweeps(ctx);
            if (status->parsed())
              return status_sweep(ctx, o->id, false);
            if (best->parsed())
              return status_sweep(ctx, o->id, true);
            return stop_sweep(ctx, o->id);
          },
          false, false};
}

} // namespace monkey::cli
