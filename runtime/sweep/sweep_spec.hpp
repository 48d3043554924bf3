// SPDX-License-Identifier: Apache-2.0
#pragma once
// A sweep file (issue #13; docs/sweeps.md): the trial to run (a command with `{name}`
// placeholders, or an app with its parameters), the search space, the metric and its goal,
// the algorithm and its settings, the budget and the trials in parallel. YAML (or JSON);
// every problem is reported as `file:line:col: field: problem`. Plain C++: no CAF
// (sweep_spec.test.cpp).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/expected.hpp"

namespace monkey::sweep {

/// How a parameter's values are drawn.
enum class dist {
  uniform,    ///< a float in [low, high]
  loguniform, ///< a float in [low, high], uniform in its logarithm (low > 0)
  integer,    ///< an integer in [low, high] (`type: int`)
  choice,     ///< one of `values`
  grid,       ///< every one of `values`, in turn (grid search; the others sample them)
};
const char* to_string(dist d);

/// One parameter of the search space.
struct param_space {
  std::string name;
  dist type = dist::uniform;
  double low = 0, high = 0;
  std::vector<std::string> values;
  /// Conditional: the parameter exists only when each named earlier parameter has one of
  /// its values (`when: {optimizer: sgd}` or `when: {optimizer: [sgd, adam]}`).
  std::map<std::string, std::vector<std::string>> when;
};

/// What each trial runs.
struct trial_template {
  std::vector<std::string> command; ///< argv with `{name}` placeholders; or
  std::string app;                  ///< an app, its parameters set by --set
  int32_t workers = 1;
  std::map<std::string, std::string> params; ///< fixed parameters, besides the space's
  int32_t cpus = 1, gpus = 0;
  int64_t mem_mb = 0;
};

struct metric_spec {
  std::string name;
  bool maximize = true;
  bool best = false; ///< a trial's value is its best point (`use: best`), else its last
};

/// The algorithm's name and settings, each checked against what the algorithm knows.
struct algorithm_spec {
  std::string name = "random"; ///< grid, random, tpe, asha, hyperband, pbt
  uint64_t seed = 0;
  std::string resource = "step"; ///< what a metric point's step counts (asha, hyperband, pbt)
  /// A metric of the trials whose value at a point's step is that point's resource (e.g. the
  /// fmnist app's `epoch`, where the steps of an epoch depend on the batch); "": the step.
  std::string resource_metric;
  std::map<std::string, double> settings; ///< e.g. reduction_factor: 3
  std::vector<double> perturb;            ///< pbt: the factors explore multiplies by
  /// The setting `key`, or `fallback` when the file left it out.
  double get(const std::string& key, double fallback) const;
};

struct budget_spec {
  int64_t trials = 0; ///< trials to finish (0: grid's size, else required)
  double wall_s = 0;  ///< stop starting trials, and stop running ones, after this (0: none)
  int64_t max_t = 0;  ///< the most resource (steps, epochs) a trial gets (asha, hyperband, pbt)
};

struct sweep_spec {
  std::string name;
  trial_template trial;
  std::vector<param_space> space; ///< in the file's order (conditions refer to earlier ones)
  metric_spec metric;
  algorithm_spec algorithm;
  budget_spec budget;
  int32_t parallel = 1;
  bool ship = true;       ///< ship the working directory to the trials' nodes
  std::vector<std::string> data; ///< data paths shipped too (docs/shipping.md)
  int32_t retries = 0;    ///< a failed trial's job retries before it counts as failed
  /// More failed trials than this (failed, timed out or lost) stop the sweep, which then
  /// fails saying why (like Vertex AI's maxFailedTrialCount); -1: no bound.
  int64_t max_failed_trials = -1;
};

/// A sweep driver's exit code for a sweep that failed (more failed trials than the file
/// allows, or none succeeded): its job ends failed at once, without the retries a driver
/// has for the loss of its node (actors/coordinator/job_book.cpp).
constexpr int sweep_failed_exit = 65;

/// The algorithms and the settings each knows (for errors and docs).
const std::map<std::string, std::vector<std::string>>& algorithm_settings();

/// Parses a sweep document; `origin` names it in errors (usually the file path).
expected<sweep_spec> parse_sweep_text(const std::string& text, const std::string& origin);
/// Reads and parses a sweep file (at most 1 MiB).
expected<sweep_spec> parse_sweep_file(const std::string& path);

} // namespace monkey::sweep
