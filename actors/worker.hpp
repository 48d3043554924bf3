// SPDX-License-Identifier: Apache-2.0
#pragma once
// A worker runs one attempt of a command job: it asks the launcher for the child process
// (or re-adopts a running one after a restart; a sweep's driver job runs no process: its
// "child" is the sweep's optimizer actor in this node, actors/sweep/sweep_actor.hpp), enforces the timeout, stops the process
// group on cancel (SIGTERM, grace, SIGKILL), turns `MONKEY_METRIC` lines of stdout into
// metric records, saves its checkpoint directory on `MONKEY_CHECKPOINT` lines (and restores
// the newest checkpoint before the child starts), and reports how the attempt ended to the
// coordinator (after the last save of its checkpoint directory).
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

/// An attempt's checkpoints on this node (docs/checkpoints.md).
struct checkpoint_args {
  std::string dir;                  ///< MONKEY_CHECKPOINT_DIR ("": the attempt has none)
  std::vector<std::string> holders; ///< the job's holders: saved pieces go to them
  bool restore = false;             ///< restore the newest checkpoint into dir first
  job_id from;                      ///< --checkpoint-from (empty: none)
  /// `MONKEY_CHECKPOINT step=N` lines save the directory, and so does the attempt's end
  /// when the directory changed (command jobs; the part of a gang that hosts rank 0).
  bool capture = false;
};

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
  checkpoint_args ckpt;
  /// Shipped code and data (docs/shipping.md): unpacked under `ship_dir` before the child
  /// starts (which then runs in the shipped working directory), removed when it ends.
  std::vector<shipment> ship;
  std::string ship_dir;
  /// A sweep's driver job (job_spec::driver): the request starts the sweep's optimizer actor
  /// in this node instead of a process. Such a child is never re-adopted: it ends with its
  /// worker, a restarted worker reports the attempt requeued (no retry charged), and the
  /// job's next attempt goes on from its checkpoint.
  bool in_node = false;
};

caf::actor spawn_worker(caf::actor_system& sys, worker_args args, caf::actor coordinator,
                        caf::actor journal, std::shared_ptr<launcher> launch);

} // namespace monkey
