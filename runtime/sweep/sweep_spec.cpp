// SPDX-License-Identifier: Apache-2.0
#include "runtime/sweep/sweep_spec.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "runtime/spec_parser.hpp"
#include "runtime/yaml_reader.hpp"

namespace monkey::sweep {

using yaml::reader;

const char* to_string(dist d) {
  switch (d) {
    case dist::uniform: return "uniform";
    case dist::loguniform: return "loguniform";
    case dist::integer: return "int";
    case dist::choice: return "choice";
    case dist::grid: return "grid";
  }
  return "?";
}

double algorithm_spec::get(const std::string& key, double fallback) const {
  auto it = settings.find(key);
  return it == settings.end() ? fallback : it->second;
}

const std::map<std::string, std::vector<std::string>>& algorithm_settings() {
  static const std::map<std::string, std::vector<std::string>> known = {
    {"grid", {}},
    {"random", {}},
    {"tpe", {"startup", "candidates", "gamma"}},
    {"asha", {"reduction_factor", "grace", "max_t"}},
    {"hyperband", {"reduction_factor", "grace", "max_t", "brackets"}},
    {"pbt", {"population", "interval", "quantile", "resample", "max_t"}},
  };
  return known;
}

namespace {

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (auto& s : v)
    out += (out.empty() ? "" : ", ") + s;
  return out;
}

/// The range each setting must lie in.
std::pair<double, double> setting_range(const std::string& key) {
  if (key == "gamma" || key == "quantile" || key == "resample")
    return {0.0, 1.0};
  if (key == "reduction_factor")
    return {2.0, 100.0};
  return {1.0, 1e9};
}

param_space parse_param(const reader& r, const std::string& name, const YAML::Node& n,
                        const std::vector<param_space>& before,
                        const std::set<std::string>& broken) {
  auto field = "space." + name;
  if (!n.IsMap())
    r.fail(n, field, std::string("expected a mapping like {type: uniform, low: 0, high: 1}, got a ")
                       + reader::kind(n));
  param_space p;
  p.name = name;
  bool has_type = false, has_low = false, has_high = false, has_values = false;
  auto problems_before = r.problems().size();
  for (auto it = n.begin(); it != n.end(); ++it)
    r.guard([&] { // each field's problem is reported, and the next field read
      auto key = r.scalar(it->first, field);
      YAML::Node v = it->second;
      auto f = field + "." + key;
      if (key == "type") {
        has_type = true;
        auto t = r.scalar(v, f);
        if (t == "uniform")
          p.type = dist::uniform;
        else if (t == "loguniform")
          p.type = dist::loguniform;
        else if (t == "int" || t == "integer")
          p.type = dist::integer;
        else if (t == "choice")
          p.type = dist::choice;
        else if (t == "grid")
          p.type = dist::grid;
        else
          r.fail(v, f, "unknown type '" + t + "' (uniform, loguniform, int, choice or grid)");
      } else if (key == "low") {
        has_low = true;
        p.low = r.number(v, f);
      } else if (key == "high") {
        has_high = true;
        p.high = r.number(v, f);
      } else if (key == "values") {
        has_values = true;
        p.values = r.string_list(v, f);
        if (p.values.empty())
          r.fail(v, f, "an empty list");
      } else if (key == "when") {
        if (!v.IsMap())
          r.fail(v, f, "expected a mapping like {optimizer: sgd}");
        for (auto c = v.begin(); c != v.end(); ++c) {
          auto other = r.scalar(c->first, f);
          YAML::Node cv = c->second;
          auto earlier = std::find_if(before.begin(), before.end(),
                                      [&](const param_space& q) { return q.name == other; });
          if (earlier == before.end() && broken.count(other))
            continue; // declared, but wrong: reported already
          if (earlier == before.end())
            r.fail(c->first, f, "'" + other + "' is not a parameter declared before " + name);
          if (earlier->type != dist::choice && earlier->type != dist::grid)
            r.fail(c->first, f, "'" + other + "' is " + to_string(earlier->type)
                                  + ": a condition needs a choice or grid parameter");
          auto vals = cv.IsSequence() ? r.string_list(cv, f + "." + other)
                                      : std::vector<std::string>{r.scalar(cv, f + "." + other)};
          for (auto& want : vals)
            if (std::find(earlier->values.begin(), earlier->values.end(), want) == earlier->values.end())
              r.fail(cv, f + "." + other, "'" + want + "' is not one of " + other + "'s values ("
                                            + join(earlier->values) + ")");
          p.when[other] = vals;
        }
      } else {
        r.fail(it->first, f, "unknown field (known: type, low, high, values, when)");
      }
    });
  if (r.problems().size() > problems_before) // its rules need its fields read right
    return p;
  if (!has_type)
    r.fail(n, field + ".type", "missing (uniform, loguniform, int, choice or grid)");
  bool ranged = p.type == dist::uniform || p.type == dist::loguniform || p.type == dist::integer;
  if (ranged) {
    if (!has_low || !has_high)
      r.fail(n, field, std::string(to_string(p.type)) + " needs low and high");
    if (has_values)
      r.fail(n, field + ".values", std::string(to_string(p.type)) + " takes low and high, not values");
    if (!(p.low <= p.high))
      r.fail(n, field, "low " + yaml::reader::number_text(p.low) + " is above high "
                         + yaml::reader::number_text(p.high));
    if (p.type == dist::loguniform && p.low <= 0)
      r.fail(n, field + ".low", "loguniform needs low > 0");
    if (p.type == dist::integer && (p.low != std::floor(p.low) || p.high != std::floor(p.high)))
      r.fail(n, field, "int needs whole low and high");
  } else {
    if (!has_values)
      r.fail(n, field, std::string(to_string(p.type)) + " needs values");
    if (has_low || has_high)
      r.fail(n, field, std::string(to_string(p.type)) + " takes values, not low and high");
  }
  return p;
}

trial_template parse_trial(const reader& r, const YAML::Node& n) {
  if (!n.IsMap())
    r.fail(n, "trial", "expected a mapping: {command: [python3, train.py, --lr, \"{lr}\"]} or "
                       "{app: fmnist, workers: 2}");
  trial_template t;
  for (auto it = n.begin(); it != n.end(); ++it)
    r.guard([&] { // each field's problem is reported, and the next field read
      auto key = r.scalar(it->first, "trial");
      YAML::Node v = it->second;
      auto f = "trial." + key;
      if (key == "command") {
        if (v.IsScalar())
          r.fail(v, f, "expected a list of arguments (argv), e.g. [python3, train.py]");
        t.command = r.string_list(v, f);
        if (t.command.empty())
          r.fail(v, f, "empty list");
      } else if (key == "app") {
        t.app = r.scalar(v, f);
      } else if (key == "workers") {
        t.workers = static_cast<int32_t>(r.integer(v, f, 1, 4096));
      } else if (key == "params") {
        t.params = r.string_map(v, f);
      } else if (key == "cpus") {
        t.cpus = static_cast<int32_t>(r.integer(v, f, 1, 4096));
      } else if (key == "gpus") {
        t.gpus = static_cast<int32_t>(r.integer(v, f, 0, 64));
      } else if (key == "mem") {
        auto mb = parse_memory_mb(r.scalar(v, f));
        if (!mb)
          r.fail(v, f, mb.error());
        t.mem_mb = *mb;
      } else {
        r.fail(it->first, f, "unknown field (known: command, app, workers, params, cpus, gpus, mem)");
      }
    });
  // Said once for the file: a field that is there but wrong was reported above.
  bool has_command = static_cast<bool>(n["command"]), has_app = static_cast<bool>(n["app"]);
  if (has_command == has_app)
    r.fail(n, "trial", has_app ? "a command or an app, not both" : "give a command or an app");
  return t;
}

algorithm_spec parse_algorithm(const reader& r, const YAML::Node& n, budget_spec& budget) {
  if (!n.IsMap())
    r.fail(n, "algorithm", "expected a mapping like {name: random, seed: 7}");
  algorithm_spec a;
  YAML::Node name = n["name"];
  if (!name)
    r.fail(n, "algorithm.name", "missing (" + [] {
      std::string names;
      for (auto& [k, v] : algorithm_settings())
        names += (names.empty() ? "" : ", ") + k;
      return names;
    }() + ")");
  a.name = r.scalar(name, "algorithm.name");
  auto known = algorithm_settings().find(a.name);
  if (known == algorithm_settings().end())
    r.fail(name, "algorithm.name", "unknown algorithm '" + a.name
                                     + "' (grid, random, tpe, asha, hyperband or pbt)");
  for (auto it = n.begin(); it != n.end(); ++it)
    r.guard([&] { // each field's problem is reported, and the next field read
      auto key = r.scalar(it->first, "algorithm");
      YAML::Node v = it->second;
      auto f = "algorithm." + key;
      if (key == "name")
        return;
      if (key == "seed") {
        a.seed = static_cast<uint64_t>(r.integer(v, f, 0, int64_t{1} << 62));
      } else if (key == "resource" && a.name != "grid" && a.name != "random" && a.name != "tpe") {
        a.resource = r.scalar(v, f);
        if (a.resource.empty())
          r.fail(v, f, "empty (e.g. step or epoch: what a metric point's step counts)");
      } else if (key == "resource_metric" && a.name != "grid" && a.name != "random"
                 && a.name != "tpe") {
        a.resource_metric = r.scalar(v, f);
        if (a.resource_metric.empty())
          r.fail(v, f, "empty (a metric the trials report, e.g. epoch, whose value at a "
                       "point's step is that point's resource)");
      } else if (key == "perturb" && a.name == "pbt") {
        if (!v.IsSequence() || v.size() == 0)
          r.fail(v, f, "expected a list of factors, e.g. [0.8, 1.2]");
        for (size_t i = 0; i < v.size(); ++i) {
          double x = r.number(v[i], f);
          if (!(x > 0))
            r.fail(v[i], f, "a factor must be positive");
          a.perturb.push_back(x);
        }
      } else if (std::find(known->second.begin(), known->second.end(), key) != known->second.end()) {
        double x = r.number(v, f);
        auto [lo, hi] = setting_range(key);
        if (x < lo || x > hi || (hi > 1.0 && x != std::floor(x)))
          r.fail(v, f, hi > 1.0 ? "must be a whole number from " + reader::number_text(lo)
                                : "must be between 0 and 1");
        a.settings[key] = x;
        if (key == "max_t")
          budget.max_t = static_cast<int64_t>(x);
      } else {
        auto keys = known->second;
        keys.insert(keys.begin(), "seed");
        if (a.name != "grid" && a.name != "random" && a.name != "tpe")
          keys.insert(keys.end(), {"resource", "resource_metric"});
        if (a.name == "pbt")
          keys.push_back("perturb");
        r.fail(it->first, f, "not a setting of " + a.name + " (known: name, " + join(keys) + ")");
      }
    });
  if (a.name == "pbt" && a.perturb.empty())
    a.perturb = {0.8, 1.2};
  return a;
}

sweep_spec parse_root(const reader& r, const YAML::Node& root) {
  if (!root.IsMap())
    r.fail(root, "sweep", std::string("expected a mapping at the top level, got a ")
                            + reader::kind(root));
  sweep_spec s;
  bool has_trial = false, has_space = false, has_metric = false;
  std::set<std::string> broken; ///< parameters declared with a problem
  YAML::Node data_node;
  YAML::Node budget_node;
  bool has_budget = false;
  for (auto it = root.begin(); it != root.end(); ++it)
    r.guard([&] { // each field's problem is reported, and the next field read
      auto key = r.scalar(it->first, "sweep");
      YAML::Node v = it->second;
      if (key == "name") {
        s.name = r.scalar(v, key);
      } else if (key == "trial") {
        has_trial = true;
        s.trial = parse_trial(r, v);
      } else if (key == "space") {
        has_space = true;
        if (!v.IsMap() || v.size() == 0)
          r.fail(v, key, "expected a mapping of parameters, e.g. lr: {type: loguniform, low: "
                         "1.0e-4, high: 1}");
        for (auto p = v.begin(); p != v.end(); ++p)
          r.guard([&] { // each parameter's problem is reported, and the next one read
            auto name = r.scalar(p->first, key);
            if (name.empty() || name.find_first_of("{} =") != std::string::npos)
              r.fail(p->first, key, "'" + name + "' is not a parameter name");
            for (auto& q : s.space)
              if (q.name == name)
                r.fail(p->first, key, "'" + name + "' twice");
            auto before = r.problems().size();
            broken.insert(name); // until it is read without a problem
            auto param = parse_param(r, name, p->second, s.space, broken);
            if (r.problems().size() == before) {
              broken.erase(name);
              s.space.push_back(std::move(param));
            }
          });
      } else if (key == "metric") {
        has_metric = true;
        if (!v.IsMap())
          r.fail(v, key, "expected a mapping like {name: accuracy, goal: maximize}");
        for (auto m = v.begin(); m != v.end(); ++m)
          r.guard([&] {
            auto mk = r.scalar(m->first, key);
            YAML::Node mv = m->second;
            auto f = "metric." + mk;
            if (mk == "name") {
              s.metric.name = r.scalar(mv, f);
            } else if (mk == "goal") {
              auto g = r.scalar(mv, f);
              if (g != "maximize" && g != "minimize")
                r.fail(mv, f, "maximize or minimize, not '" + g + "'");
              s.metric.maximize = g == "maximize";
            } else if (mk == "use") {
              auto u = r.scalar(mv, f);
              if (u != "last" && u != "best")
                r.fail(mv, f, "last or best (which of a trial's values counts), not '" + u + "'");
              s.metric.best = u == "best";
            } else {
              r.fail(m->first, f, "unknown field (known: name, goal, use)");
            }
          });
        if (s.metric.name.empty() && !static_cast<const YAML::Node&>(v)["name"])
          r.fail(v, "metric.name", "missing (a metric the trials report, e.g. accuracy)");
      } else if (key == "algorithm") {
        s.algorithm = parse_algorithm(r, v, s.budget);
      } else if (key == "budget") {
        budget_node = v;
        has_budget = true;
      } else if (key == "parallel") {
        s.parallel = static_cast<int32_t>(r.integer(v, key, 1, 4096));
      } else if (key == "ship") {
        auto b = r.scalar(v, key);
        if (b != "true" && b != "false")
          r.fail(v, key, "true or false, not '" + b + "'");
        s.ship = b == "true";
      } else if (key == "data") {
        data_node = v;
        s.data = v.IsScalar() ? std::vector<std::string>{v.Scalar()} : r.string_list(v, key);
        for (size_t i = 0; i < s.data.size(); ++i)
          if (s.data[i].empty())
            r.fail(v.IsSequence() ? v[i] : v, key, "an empty path");
      } else if (key == "retries") {
        s.retries = static_cast<int32_t>(r.integer(v, key, 0, 100));
      } else if (key == "max_failed_trials") {
        s.max_failed_trials = r.integer(v, key, 0, 1000000);
      } else {
        r.fail(it->first, key, "unknown field (known: name, trial, space, metric, algorithm, "
                               "budget, parallel, ship, data, retries, max_failed_trials)");
      }
    });
  // What the whole file must say, each checked and reported on its own.
  bool read = r.problems().empty();
  if (!has_trial)
    r.guard([&] { r.fail(root, "trial", "missing (what each trial runs: a command or an app)"); });
  if (read && !s.data.empty() && (!s.ship || s.trial.command.empty()))
    r.guard([&] {
      r.fail(data_node, "data", s.trial.command.empty()
                                  ? "app trials ship nothing (the app is installed on each node)"
                                  : "ship: false says the nodes share the paths: ship nothing");
    });
  if (!has_space)
    r.guard([&] { r.fail(root, "space", "missing (the parameters to search)"); });
  if (!has_metric)
    r.guard([&] { r.fail(root, "metric", "missing (e.g. {name: accuracy, goal: maximize})"); });
  if (has_budget && !budget_node.IsMap())
    r.guard([&] {
      r.fail(budget_node, "budget", "expected a mapping like {trials: 60, wall: 30m}");
    });
  else if (has_budget) {
    for (auto it = budget_node.begin(); it != budget_node.end(); ++it)
      r.guard([&] {
        auto key = r.scalar(it->first, "budget");
        YAML::Node v = it->second;
        auto f = "budget." + key;
        if (key == "trials") {
          s.budget.trials = r.integer(v, f, 1, 1000000);
        } else if (key == "wall") {
          auto d = parse_duration_s(r.scalar(v, f));
          if (!d)
            r.fail(v, f, d.error());
          s.budget.wall_s = *d;
        } else if (key == "max_t") {
          auto t = r.integer(v, f, 1, 1000000000);
          if (s.budget.max_t > 0 && s.budget.max_t != t)
            r.fail(v, f, "differs from algorithm.max_t (" + std::to_string(s.budget.max_t) + ")");
          s.budget.max_t = t;
        } else {
          r.fail(it->first, f, "unknown field (known: trials, wall, max_t)");
        }
      });
  }
  // The rules between fields, once every field was read without a problem.
  if (!r.problems().empty())
    return s;
  if (s.algorithm.name == "grid")
    for (auto& p : s.space)
      if (p.type != dist::grid && p.type != dist::choice)
        r.fail(reader::at(root, "space." + p.name), "space." + p.name, std::string("algorithm grid needs values for every "
                                                    "parameter; this one is ")
                                          + to_string(p.type));
  if (s.algorithm.name != "grid" && s.budget.trials == 0)
    r.fail(reader::at(root, "budget.trials"), "budget.trials",
           "missing: how many trials " + s.algorithm.name + " runs");
  bool resource_based = s.algorithm.name == "asha" || s.algorithm.name == "hyperband"
                        || s.algorithm.name == "pbt";
  if (resource_based && s.budget.max_t == 0)
    r.fail(reader::at(root, "budget.max_t"), "budget.max_t", "missing: " + s.algorithm.name + " needs the most "
                                   + s.algorithm.resource + "s a trial gets (algorithm.max_t "
                                   "or budget.max_t)");
  // Placeholders name parameters of the space (or fixed ones).
  for (auto& arg : s.trial.command)
    for (size_t at = arg.find('{'); at != std::string::npos; at = arg.find('{', at + 1)) {
      auto end = arg.find('}', at);
      if (end == std::string::npos)
        break;
      auto name = arg.substr(at + 1, end - at - 1);
      bool known = std::any_of(s.space.begin(), s.space.end(),
                               [&](const param_space& p) { return p.name == name; })
                   || s.trial.params.count(name);
      if (!known)
        r.fail(reader::at(root, "trial.command"), "trial.command", "the placeholder {" + name + "} names no parameter of "
                                      "the space");
    }
  if (s.name.empty())
    s.name = "sweep";
  return s;
}

} // namespace

expected<sweep_spec> parse_sweep_text(const std::string& text, const std::string& origin) {
  return yaml::load(text, origin, parse_root);
}

expected<sweep_spec> parse_sweep_file(const std::string& path) {
  auto text = yaml::read_document(path, "sweep file");
  if (!text)
    return failure{text.error()};
  return parse_sweep_text(*text, path);
}

} // namespace monkey::sweep
