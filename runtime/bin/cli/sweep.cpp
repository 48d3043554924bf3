// SPDX-License-Identifier: Apache-2.0
// monkey sweep check FILE: reads a sweep file (docs/sweeps.md) the way a node will, and shows
// the trials its algorithm would start first: a bad file gets the error naming its line and
// field before anything runs. The sweep verbs that run trials (start, list, status, best,
// stop) come with the optimizer actors.
#include "runtime/bin/cli/cli.hpp"

#include "runtime/sweep/optimizer.hpp"

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

} // namespace

verb_def add_sweep(CLI::App& app) {
  auto file = std::make_shared<std::string>();
  auto count = std::make_shared<int>(5);
  auto* s = app.add_subcommand("sweep", "hyperparameter sweeps (docs/sweeps.md): monkey sweep "
                                        "check FILE");
  auto* check = s->add_subcommand("check", "read a sweep file and show the first trials its "
                                           "algorithm would start");
  check->add_option("FILE", *file, "the sweep file (YAML or JSON)")->required();
  check->add_option("--trials", *count, "how many trials to show")->capture_default_str();
  s->require_subcommand(1);
  return {s,
          [file, count](context& ctx) {
            auto spec = sweep::parse_sweep_file(*file);
            if (!spec)
              return fail(spec.error(), exit_usage);
            auto opt = sweep::make_optimizer(*spec);
            if (!opt)
              return fail(*file + ": algorithm.name: " + opt.error(), exit_usage);
            std::vector<sweep::assignment> first;
            for (int k = 0; k < *count; ++k) {
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
            std::printf("first trials:\n");
            for (size_t i = 0; i < first.size(); ++i)
              std::printf("  %zu: %s\n", i, trial_line(*spec, first[i]).c_str());
            return 0;
          },
          false, false};
}

} // namespace monkey::cli
