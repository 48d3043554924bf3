// SPDX-License-Identifier: Apache-2.0
#pragma once
// What an attempt's process is started with: its argv (placeholders filled), its
// environment (the runtime's own less MONKEY_*, the spec's env, then MONKEY_JOB_ID,
// MONKEY_ATTEMPT, MONKEY_ATTEMPT_ID, MONKEY_SEED, MONKEY_PARAM_<NAME>, MONKEY_ARRAY_INDEX,
// CUDA_VISIBLE_DEVICES, OMP_NUM_THREADS, OPENBLAS_NUM_THREADS), its log files and its
// cgroup. Plain C++: no CAF; launch_env.test.cpp.

#include <map>
#include <string>
#include <vector>

#include "runtime/job.hpp"
#include "runtime/process/launcher.hpp"

namespace monkey {

/// The runtime's environment as inherited (read once), without MONKEY_* variables.
const std::map<std::string, std::string>& inherited_env();

/// `cgroup_base`: "" when cgroups are not used; else the attempt gets
/// CGROUP_BASE/monkey-NODE/SHORTID-N.
launch_request launch_for(const job_record& rec, const attempt_record& at,
                          const std::vector<int32_t>& gpus, const node_id& node,
                          const std::string& cgroup_base,
                          const std::map<std::string, std::string>& base_env = inherited_env());

} // namespace monkey
