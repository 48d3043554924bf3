// SPDX-License-Identifier: Apache-2.0
#pragma once
// A worker runs one attempt of a command job: it asks the launcher for the child process
// (or re-adopts a running one after a restart), enforces the timeout, stops the process
// group on cancel (SIGTERM, grace, SIGKILL), turns `MONKEY_METRIC` lines of stdout into
// metric records, and reports how the attempt ended to the coordinator.
//
// Sends to the coordinator:
//   (started, job_id, int32_t attempt, launch_result)
//   (done, job_id, int32_t attempt, attempt_result)
// Receives:
//   (stop, std::string why)   why = "cancelled" or "requeued": stop the process group

#include <chrono>
#include <memory>

#include <caf/fwd.hpp>

#include "runtime/job.hpp"
#include "runtime/process/launcher.hpp"

namespace monkey {

struct worker_args {
  job_id job;
  int32_t attempt = 0;
  launch_request request;        ///< used when not adopting
  bool adopt = false;            ///< re-adopt a running child instead of spawning one
  int adopt_pid = 0;             ///< its pid; 0 when never recorded (found by log path)
  int pgid = 0;
  std::string cgroup_dir;
  double timeout_s = 0;          ///< 0: none
  int64_t started_ms = 0;        ///< for the remaining timeout after a re-adoption
  std::string stdout_path;
  int64_t mem_limit_mb = 0;      ///< --mem: cgroup memory.max, else the memory watch (1 s)
  std::chrono::milliseconds kill_grace{10000};
  uint32_t metric_rate = 50;     ///< points per second per job (burst 10x)
};

caf::actor spawn_worker(caf::actor_system& sys, worker_args args, caf::actor coordinator,
                        caf::actor journal, std::shared_ptr<launcher> launch);

} // namespace monkey
