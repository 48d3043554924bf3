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

#include "devices/device.hpp"
#include "runtime/job.hpp"
#include "runtime/process/launcher.hpp"

namespace monkey {

/// Where the Python helper module (`import monkey`) lies next to this runtime's binaries:
/// BIN/../python (a build tree) or BIN/../share/monkey/python (installed); "" when absent.
const std::string& python_helper_dir();

/// The runtime's environment as inherited (read once), without MONKEY_* variables.
const std::map<std::string, std::string>& inherited_env();

/// `cgroup_base`: "" when cgroups are not used; else the attempt gets
/// CGROUP_BASE/monkey-NODE/SHORTID-N.
launch_request launch_for(const job_record& rec, const attempt_record& at,
                          const std::vector<int32_t>& gpus, const node_id& node,
                          const std::string& cgroup_base,
                          const std::map<std::string, std::string>& base_env = inherited_env(),
                          const std::string& python_dir = python_helper_dir());

/// MONKEY_GFLOPS: the measured GEMM speed of what each worker computes on (its first GPU,
/// else its `cpus` of the CPU's slots), for apps that split work by speed (fmnist's
/// split=speed); not set when the node has no figure.
void add_device_speed(launch_request& req, const std::vector<devices::device_info>& devices,
                      const job_spec& spec, const std::vector<int32_t>& gpus);

/// An app job's host process on this node: which executable, which ranks, and how it
/// reaches the node (docs/writing-apps.md, "The app host").
struct app_host_launch {
  std::string executable;   ///< "" when this node lacks the app: the attempt fails, saying so
  std::string node_address; ///< the node's gateway (host:port), reached over loopback
  std::string attempt_key;  ///< hex of the attempt's key (runtime/net/auth.hpp)
  std::vector<int32_t> ranks;
  std::map<std::string, std::string> env; ///< the node's network settings
};

/// Turns `req` (from launch_for) into the start of an app host: argv is the app's
/// executable and `--host`; the environment adds MONKEY_APP, MONKEY_APP_RANKS,
/// MONKEY_WORLD_SIZE, MONKEY_NODE_ADDRESS, MONKEY_APP_KEY, MONKEY_RANK_LOGS and `h.env`;
/// OMP/OpenBLAS threads are the job's cpus per worker.
void add_app_host(launch_request& req, const job_record& rec, const attempt_record& at,
                  const app_host_launch& h);

/// One node's part of a gang that spans nodes.
struct gang_layout {
  std::vector<int32_t> ranks;
  int32_t group = 0; ///< the part's index (GROUP_RANK)
  std::string master_addr;
  int32_t master_port = 0;
};

/// Turns `req` into the start of a gang command job's runner (runtime/process/gang.hpp):
/// argv `RUNTIME __gang N [--ranks LIST --group G --master HOST:PORT] -- ARGV...`,
/// MONKEY_RANK_LOGS and MONKEY_KILL_GRACE_MS added.
void add_gang_runner(launch_request& req, const job_record& rec, const attempt_record& at,
                     const std::string& runtime_exe, int64_t kill_grace_ms,
                     const gang_layout* part = nullptr);

} // namespace monkey
