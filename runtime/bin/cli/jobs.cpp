// SPDX-License-Identifier: Apache-2.0
// monkey jobs [--state S] [--name GLOB] [--param K=V]... [--columns C,...] [--sort C]
//             [--sweep ID | --all] [--limit N]: one row per job of the cluster; a sweep's
//             trials are folded into one line under the sweep's row unless asked for.
#include "runtime/bin/cli/cli.hpp"

#include <algorithm>
#include <cstdlib>
#include <fnmatch.h>
#include <iostream>

namespace monkey::cli {

namespace {

struct jobs_options {
  std::string state;
  uint32_t limit = 0;
  std::string name;                 ///< glob on the display name
  std::vector<std::string> params;  ///< K=V, all must match
  std::vector<std::string> columns; ///< parameter or metric names
  std::string sort;                 ///< a column; "-C" sorts descending
  std::string sweep;                ///< only this sweep's trials (an id or a unique suffix)
  bool all = false;                 ///< every trial its own row
};

/// A sweep's trials folded under its row: how many, in which states (in the order of
/// job_state), e.g. "20 trials: 17 succeeded, 2 failed, 1 running".
struct folded {
  size_t trials = 0;
  std::map<job_state, size_t> by_state;
  std::string line() const {
    std::string out = std::to_string(trials) + (trials == 1 ? " trial: " : " trials: ");
    bool first = true;
    for (auto& [st, n] : by_state) {
      out += (first ? "" : ", ") + std::to_string(n) + " " + to_string(st);
      first = false;
    }
    return out;
  }
};

/// Takes out of `jobs` the trials whose sweep's driver is listed too: what is left, and
/// the fold of each driver (by its id).
std::map<std::string, folded> fold_trials(std::vector<job_summary>& jobs) {
  std::map<std::string, folded> out;
  for (auto& j : jobs)
    if (j.driver)
      out[j.id.str()];
  jobs.erase(std::remove_if(jobs.begin(), jobs.end(),
                            [&](const job_summary& j) {
                              auto it = j.sweep.empty() || j.driver ? out.end() : out.find(j.sweep);
                              if (it == out.end())
                                return false;
                              ++it->second.trials;
                              ++it->second.by_state[j.state];
                              return true;
                            }),
             jobs.end());
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (auto& s : v)
    out += (out.empty() ? "" : ", ") + s;
  return out;
}

/// The value of an extra column for a row: its parameter, else its last metric, else "".
std::string cell(const job_summary& j, const std::string& col) {
  if (auto p = j.params.find(col); p != j.params.end())
    return p->second;
  if (auto m = j.metrics.find(col); m != j.metrics.end()) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.6g", m->second);
    return buf;
  }
  return {};
}

/// The sort key of a row for column `col` (the standard ones, then extra columns).
std::string standard_cell(const job_summary& j, const std::string& col) {
  if (col == "id")
    return j.id.str();
  if (col == "name")
    return j.name;
  if (col == "state")
    return to_string(j.state);
  if (col == "age" || col == "submitted")
    return std::to_string(j.submitted_ms);
  if (col == "priority" || col == "prio")
    return std::to_string(j.priority);
  if (col == "exit")
    return std::to_string(j.exit_code);
  if (col == "attempts")
    return std::to_string(j.attempts);
  return cell(j, col);
}

/// Numbers sort as numbers (empty cells last), text as text.
bool less_cell(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty())
    return !a.empty() && b.empty();
  char *ea = nullptr, *eb = nullptr;
  double x = std::strtod(a.c_str(), &ea), y = std::strtod(b.c_str(), &eb);
  if (*ea == '\0' && *eb == '\0')
    return x < y;
  return a < b;
}

int run_jobs(context& ctx, const jobs_options& o) {
  std::map<std::string, std::string> wanted;
  for (auto& kv : o.params) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return fail("jobs: --param " + kv + ": expected NAME=VALUE", exit_usage);
    wanted[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  bool descending = !o.sort.empty() && o.sort[0] == '-';
  auto sort_col = descending ? o.sort.substr(1) : o.sort;
  auto c = ctx.connect();
  if (!c)
    return fail(c.error());
  bool local_filter = !o.name.empty() || !wanted.empty() || !sort_col.empty();
  list_request req{o.state, local_filter ? 0 : o.limit};
  if (!o.sweep.empty()) { // the sweep's full id: trials name it so
    auto sw = (*c)->call<show_reply>(verb::show, id_request{o.sweep});
    if (!sw)
      return fail("jobs --sweep " + o.sweep + ": " + sw.error());
    req.sweep = sw->record.id.str();
  }
  // Metric values are asked for only when shown or sorted on (the node that ran each job
  // reads them from its journal).
  req.metrics = ctx.g.json || !o.columns.empty() || !sort_col.empty();
  auto r = (*c)->call<list_reply>(verb::list, req);
  if (!r)
    return fail("jobs: " + r.error());
  if (!r->unreachable.empty())
    std::fprintf(stderr, "monkey: jobs: partial list: no answer from %s\n",
                 joined(r->unreachable).c_str());
  if (!r->dead.empty())
    std::fprintf(stderr,
                 "monkey: jobs: %zu dead member%s (%s): jobs held only by %s are not shown\n",
                 r->dead.size(), r->dead.size() == 1 ? "" : "s", joined(r->dead).c_str(),
                 r->dead.size() == 1 ? "it" : "them");
  auto& jobs = r->jobs;
  jobs.erase(std::remove_if(jobs.begin(), jobs.end(),
                            [&](const job_summary& j) {
                              if (!o.name.empty() && ::fnmatch(o.name.c_str(), j.name.c_str(), 0) != 0)
                                return true;
                              for (auto& [k, v] : wanted) {
                                auto it = j.params.find(k);
                                if (it == j.params.end() || it->second != v)
                                  return true;
                              }
                              return false;
                            }),
             jobs.end());
  if (!sort_col.empty())
    std::stable_sort(jobs.begin(), jobs.end(), [&](const job_summary& a, const job_summary& b) {
      auto x = standard_cell(a, sort_col), y = standard_cell(b, sort_col);
      if (x.empty() || y.empty()) // rows without the value go last either way
        return !x.empty() && y.empty();
      return descending ? less_cell(y, x) : less_cell(x, y);
    });
  if (local_filter && o.limit > 0 && jobs.size() > o.limit) {
    if (sort_col.empty()) // newest last, as the node's limit keeps the newest N
      jobs.erase(jobs.begin(), jobs.end() - o.limit);
    else
      jobs.resize(o.limit);
  }
  if (ctx.g.json) {
    json out = json::array();
    for (auto& j : jobs)
      out.push_back(to_json(j));
    std::cout << out.dump() << "\n";
    return 0;
  }
  // Each sweep is one row with its trials summed up under it, unless the trials are asked
  // for (--all, --sweep) or searched among (--param, --sort).
  std::map<std::string, folded> folds;
  if (!o.all && o.sweep.empty() && wanted.empty() && sort_col.empty())
    folds = fold_trials(jobs);
  auto names = node_names(ctx);
  std::vector<size_t> widths;
  for (auto& col : o.columns) {
    size_t w = col.size();
    for (auto& j : jobs)
      w = std::max(w, cell(j, col).size());
    widths.push_back(std::min<size_t>(w, 24));
  }
  // The header (j == nullptr) names the extra columns in upper case.
  auto extra = [&](const job_summary* j) {
    std::string out;
    for (size_t i = 0; i < o.columns.size(); ++i) {
      auto v = j ? cell(*j, o.columns[i]) : o.columns[i];
      if (!j)
        std::transform(v.begin(), v.end(), v.begin(), ::toupper);
      else if (v.empty())
        v = "-";
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%-*.*s  ", static_cast<int>(widths[i]),
                    static_cast<int>(widths[i]), v.c_str());
      out += buf;
    }
    return out;
  };
  std::printf("%-10s  %-24s  %-9s  %3s  %4s  %4s  %5s  %-8s  %s%s\n", "ID", "NAME", "STATE",
              "ATT", "PRIO", "EXIT", "AGE", "NODE", extra(nullptr).c_str(), "REASON");
  size_t hidden = 0, shown_sweeps = 0;
  for (auto& j : jobs) {
    std::printf("%-10s  %-24.24s  %-9s  %3d  %4d  %4s  %5s  %-8.8s  %s%s\n",
                j.id.short_str().c_str(), j.name.c_str(),
                j.unavailable ? "unavailable" : to_string(j.state), j.attempts, j.priority,
                j.exit_code < 0 ? "-" : std::to_string(j.exit_code).c_str(),
                age(j.submitted_ms).c_str(),
                name_of(names, j.ran_on.empty() ? j.owner : j.ran_on).c_str(),
                extra(&j).c_str(), j.reason.c_str());
    if (auto f = folds.find(j.id.str()); f != folds.end() && f->second.trials > 0) {
      std::printf("%-10s  `- %s (monkey jobs --sweep %s)\n", "", f->second.line().c_str(),
                  j.id.short_str().c_str());
      ++shown_sweeps;
      hidden += f->second.trials;
    }
  }
  if (hidden > 0)
    std::printf("%zu trial%s of %zu sweep%s folded: monkey jobs --all lists every one\n", hidden,
                hidden == 1 ? "" : "s", shown_sweeps, shown_sweeps == 1 ? "" : "s");
  return 0;
}

} // namespace

verb_def add_jobs(CLI::App& app) {
  auto o = std::make_shared<jobs_options>();
  auto* s = app.add_subcommand("jobs", "list the jobs of the cluster");
  s->add_option("--state", o->state, "only jobs in this state");
  s->add_option("--name", o->name, "only jobs whose name matches this glob, e.g. 'sweep-*'");
  s->add_option("--param", o->params, "only jobs with parameter NAME=VALUE (repeatable)");
  s->add_option("--sweep", o->sweep, "only the trials of this sweep (monkey sweep list)");
  s->add_flag("--all", o->all,
              "every trial of every sweep its own row (by default a sweep's trials are "
              "summed up under its row; --json always lists every job)");
  s->add_option("--columns", o->columns,
                "extra columns: parameters or metrics (last value), e.g. lr,bs,loss")
    ->delimiter(',');
  s->add_option("--sort", o->sort,
                "sort by a column (a parameter, a metric, or id, name, state, age, priority, "
                "exit, attempts); -COLUMN sorts descending");
  s->add_option("--limit", o->limit, "only the newest N (the first N when sorted)");
  return {s, [o](context& ctx) { return run_jobs(ctx, *o); }};
}

} // namespace monkey::cli
