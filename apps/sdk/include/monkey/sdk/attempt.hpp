// SPDX-License-Identifier: Apache-2.0
// The Monkey app SDK (monkey::sdk): what a program run as a Monkey job needs, without the
// runtime's internals (no CAF, no journal). Today: the attempt a process runs as, read from
// the environment the runtime starts it with (docs/job-spec.md, "Environment"). The
// app host's verbs come with the app issue.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace monkey::sdk {

/// The attempt this process runs as.
struct attempt_context {
  std::string job_id;      ///< MONKEY_JOB_ID: the job's id (26 characters)
  int32_t attempt = 0;     ///< MONKEY_ATTEMPT: 1 for the first run, 2 for the first retry, ...
  std::string attempt_id;  ///< MONKEY_ATTEMPT_ID: node.incarnation.sequence of this run
  uint64_t seed = 0;       ///< MONKEY_SEED: the job's seed (the same for every attempt)
  int32_t array_index = -1; ///< MONKEY_ARRAY_INDEX, or -1 outside a job array
  /// The job's parameters (`params:` in the spec), by their MONKEY_PARAM_<NAME> names with
  /// the prefix removed: `lr` is "LR", `batch-size` is "BATCH_SIZE".
  std::map<std::string, std::string> params;

  /// A parameter by its spec name (`lr`, `batch-size`), or nothing.
  std::optional<std::string> param(const std::string& name) const;
};

/// Why this process is not (correctly) a Monkey attempt.
struct context_error {
  std::string what; ///< names the variable and what is wrong with it
};

/// The attempt context from an environment given as name -> value.
/// An error when MONKEY_JOB_ID is missing (not started by Monkey) or a number is malformed.
std::optional<attempt_context> attempt_from(const std::map<std::string, std::string>& env,
                                            context_error* error = nullptr);

/// The attempt context of this process (from `environ`).
std::optional<attempt_context> current_attempt(context_error* error = nullptr);

/// The environment name of a parameter: MONKEY_PARAM_ and the name in capitals, every
/// character other than a letter or digit as '_'.
std::string param_env_name(const std::string& name);

/// The version of Monkey this SDK belongs to ("0.1.0").
const char* version();

} // namespace monkey::sdk
