// SPDX-License-Identifier: Apache-2.0
#include "actors/coordinator/launch_env.hpp"

#include <algorithm>

#include <climits>
#include <cstdlib>
#include <unistd.h>

#include "runtime/process/proc.hpp"

extern char** environ;

namespace monkey {

const std::map<std::string, std::string>& inherited_env() {
  static const std::map<std::string, std::string> env = [] {
    std::map<std::string, std::string> out;
    for (char** e = environ; e && *e; ++e) {
      std::string kv = *e;
      auto eq = kv.find('=');
      if (eq != std::string::npos && kv.rfind("MONKEY_", 0) != 0)
        out[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    return out;
  }();
  return env;
}

const std::string& python_helper_dir() {
  static const std::string dir = [] {
    auto bin = self_dir();
    for (auto candidate : {bin + "/../python", bin + "/../share/monkey/python"})
      if (::access((candidate + "/monkey/__init__.py").c_str(), R_OK) == 0) {
        char real[PATH_MAX];
        return std::string(::realpath(candidate.c_str(), real) ? real : candidate.c_str());
      }
    return std::string{};
  }();
  return dir;
}

launch_request launch_for(const job_record& rec, const attempt_record& at,
                          const std::vector<int32_t>& gpus, const node_id& node,
                          const std::string& cgroup_base,
                          const std::map<std::string, std::string>& base_env,
                          const std::string& python_dir) {
  launch_request req;
  auto argv = substitute_params(rec.spec);
  req.argv = argv ? *argv : rec.spec.command;
  auto env = base_env;
  for (auto& [k, v] : rec.spec.env)
    env[k] = v;
  env["MONKEY_JOB_ID"] = rec.id.str();
  env["MONKEY_ATTEMPT"] = std::to_string(at.number);
  env["MONKEY_ATTEMPT_ID"] = at.id.str();
  env["MONKEY_SEED"] = std::to_string(rec.spec.seed);
  for (auto& [k, v] : rec.spec.params)
    env[param_env_name(k)] = v;
  if (rec.spec.array_index >= 0)
    env["MONKEY_ARRAY_INDEX"] = std::to_string(rec.spec.array_index);
  std::string visible;
  for (int g : gpus)
    visible += (visible.empty() ? "" : ",") + std::to_string(g);
  env["CUDA_VISIBLE_DEVICES"] = visible;
  if (!python_dir.empty()) { // `import monkey`, after the job's own PYTHONPATH
    auto& path = env["PYTHONPATH"];
    path = path.empty() ? python_dir : path + ":" + python_dir;
  }
  env["OMP_NUM_THREADS"] = std::to_string(rec.spec.cpus);
  env["OPENBLAS_NUM_THREADS"] = std::to_string(rec.spec.cpus);
  req.env.reserve(env.size());
  for (auto& [k, v] : env)
    req.env.push_back(k + "=" + v);
  req.workdir = rec.spec.workdir;
  req.stdout_path = at.log_out;
  req.stderr_path = at.log_err;
  req.mem_limit_mb = rec.spec.mem_mb;
  if (!cgroup_base.empty())
    req.cgroup_dir = cgroup_base + "/monkey-" + node.str() + "/" + rec.id.short_str() + "-"
                     + std::to_string(at.number);
  return req;
}

void add_device_speed(launch_request& req, const std::vector<devices::device_info>& devices,
                      const job_spec& spec, const std::vector<int32_t>& gpus) {
  double gflops = 0;
  for (auto& d : devices) {
    if (!gpus.empty() && d.kind == "cuda" && d.index == gpus.front())
      gflops = d.gflops;
    if (gpus.empty() && d.kind == "cpu" && d.slots > 0)
      gflops = d.gflops * std::min(spec.cpus, d.slots) / d.slots;
  }
  if (gflops > 0)
    req.env.push_back("MONKEY_GFLOPS=" + std::to_string(gflops));
}

void add_app_host(launch_request& req, const job_record& rec, const attempt_record& at,
                  const app_host_launch& h) {
  req.argv = {h.executable.empty() ? "monkey-app-" + rec.spec.app : h.executable, "--host"};
  std::map<std::string, std::string> add = h.env;
  add["MONKEY_APP"] = rec.spec.app;
  add["MONKEY_APP_RANKS"] = rank_list_text(h.ranks);
  add["MONKEY_WORLD_SIZE"] = std::to_string(rec.spec.ranks());
  add["MONKEY_NODE_ADDRESS"] = h.node_address;
  add["MONKEY_APP_KEY"] = h.attempt_key;
  add["MONKEY_RANK_LOGS"] = at.log_out;
  std::vector<std::string> env;
  for (auto& kv : req.env) {
    auto name = kv.substr(0, kv.find('='));
    if (!add.count(name))
      env.push_back(kv);
  }
  for (auto& [k, v] : add)
    env.push_back(k + "=" + v);
  req.env = std::move(env);
}

void add_gang_runner(launch_request& req, const job_record& rec, const attempt_record& at,
                     const std::string& runtime_exe, int64_t kill_grace_ms,
                     const gang_layout* part) {
  std::vector<std::string> argv{runtime_exe, "__gang", std::to_string(rec.spec.ranks())};
  if (part)
    argv.insert(argv.end(), {"--ranks", rank_list_text(part->ranks), "--group",
                             std::to_string(part->group), "--master",
                             part->master_addr + ":" + std::to_string(part->master_port)});
  argv.push_back("--");
  argv.insert(argv.end(), req.argv.begin(), req.argv.end());
  req.argv = std::move(argv);
  req.env.push_back("MONKEY_RANK_LOGS=" + at.log_out);
  req.env.push_back("MONKEY_KILL_GRACE_MS=" + std::to_string(kill_grace_ms));
}

} // namespace monkey
