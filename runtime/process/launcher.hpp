// SPDX-License-Identifier: Apache-2.0
#pragma once
// Child processes for command jobs. One long-lived launcher thread forks every child (so
// PR_SET_PDEATHSIG ties the children to the runtime's life) and reaps them through pidfds,
// independently of the actors: a restarted worker re-adopts a running child with `adopt`.
// Plain C++: no CAF. Callbacks run on the launcher thread and must not block.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace monkey {

struct launch_request {
  std::vector<std::string> argv;
  std::vector<std::string> env; ///< complete "NAME=value" list
  std::string workdir;          ///< empty: the runtime's own
  std::string stdout_path;
  std::string stderr_path;
  std::string cgroup_dir; ///< cgroup v2 directory to create and enter; empty: none
  int64_t mem_limit_mb = 0; ///< memory.max of that cgroup (0: none)
};

struct launch_result {
  int pid = 0;
  int pgid = 0;
  uint64_t start_ticks = 0;
  std::string cgroup_dir; ///< the cgroup actually used ("" when it could not be made)
  std::string error;      ///< non-empty: nothing runs; says what is wrong
  int64_t resumed_step = -1; ///< the checkpoint step restored before it started (-1: none)
  std::string resumed_from;  ///< whose checkpoint (a job id)
};

struct exit_info {
  int pid = 0;
  int exit_code = -1;  ///< -1 when killed by a signal
  int term_signal = 0; ///< 0 when it exited
  int64_t max_rss_kb = 0;
  double cpu_s = 0;
};

class launcher {
public:
  using spawn_callback = std::function<void(const launch_result&)>;
  using exit_callback = std::function<void(const exit_info&)>;

  launcher();
  ~launcher();
  launcher(const launcher&) = delete;
  launcher& operator=(const launcher&) = delete;

  /// Queues a spawn; `on_spawned` runs once the child runs (or failed to start), and
  /// `on_exit` once it has been reaped.
  void spawn(launch_request req, spawn_callback on_spawned, exit_callback on_exit);

  /// Replaces the exit listener of a child. If it already exited (recently), `on_exit`
  /// runs at once. Returns false when the pid is not a child of this launcher.
  bool adopt(int pid, exit_callback on_exit);

  /// Re-adopts a child known only by its request's stdout path (its pid was never
  /// recorded): a queued spawn gets the new callbacks; a spawned child reports to
  /// `on_spawned` at once and to `on_exit` when it ends. False when nothing matches.
  bool adopt_request(const std::string& stdout_path, spawn_callback on_spawned,
                     exit_callback on_exit);

  /// Number of children not yet reaped.
  size_t running() const;

  /// Kills what is left in a job's cgroup and removes it, on the launcher thread: a
  /// cgroup is busy for a moment after its last process exits, and no actor should wait.
  void retire_cgroup(std::string cgroup_dir);

  struct impl;

private:
  std::unique_ptr<impl> impl_;
};

/// Blocking one-off spawn and wait for short helper runs (tests, measurements); returns
/// the exit code or -1. Not for jobs.
int run_and_wait(const std::vector<std::string>& argv, const std::string& stdout_path);

/// Where an executable named `file` is looked for: itself when it contains a '/', else
/// each directory of `path_env` (the job's PATH; empty: /usr/local/bin:/usr/bin:/bin),
/// an empty entry meaning the working directory.
std::vector<std::string> exec_candidates(const std::string& file, const std::string& path_env);

} // namespace monkey
