// SPDX-License-Identifier: Apache-2.0
#pragma once
// Process and cgroup helpers on Linux /proc and cgroup v2. Plain C++.

#include <cstdint>
#include <string>
#include <vector>

namespace monkey {

/// Field 22 of /proc/PID/stat (start time in clock ticks since boot); 0 when gone.
uint64_t proc_start_ticks(int pid);

/// Pids whose process group is `pgid` and who started at or after `min_start_ticks`.
std::vector<int> pids_in_group(int pgid, uint64_t min_start_ticks);

/// Sends `sig` to every process of the job: its cgroup (cgroup.kill for SIGKILL, else each
/// pid of cgroup.procs) when it has one, plus its process group. Returns how many
/// signals were sent.
int signal_job(const std::string& cgroup_dir, int pgid, int sig);

/// Kills what is left of an attempt of an earlier incarnation of this runtime: its cgroup,
/// and the processes of its group that started no earlier than the journaled leader.
/// Returns how many processes or cgroups were killed.
int kill_leftovers(const std::string& cgroup_dir, int pgid, uint64_t start_ticks);

/// The cgroup v2 directory under which this process may create job cgroups, or "" when
/// cgroup v2 is absent or not writable.
std::string cgroup_base();

/// Resident memory of the live processes of group `pgid`, in KB (summed over them).
int64_t group_rss_kb(int pgid);

/// Sets the cgroup's memory.max to `mb` MB (and memory.swap.max to 0, so that going over
/// means the OOM killer, not swap); false when the memory controller is not available.
bool cgroup_limit_memory(const std::string& cgroup_dir, int64_t mb);

/// True when the cgroup's memory.max is a number (a limit), not "max" or absent.
bool cgroup_memory_limited(const std::string& cgroup_dir);

/// True when the cgroup has a memory.events file reporting an oom_kill.
bool cgroup_oom_killed(const std::string& cgroup_dir);

/// Removes a job's cgroup directory (after killing what remains).
void cgroup_remove(const std::string& cgroup_dir);

/// "SIGKILL" for 9, etc.
std::string signal_name(int sig);

/// The path of this process's executable (/proc/self/exe); "" when it cannot be read.
std::string self_executable();
/// Its folder ("." when unknown): where monkey-measure, the apps and the CLI sit.
std::string self_dir();

/// A TCP port free now on `ip` (IPv4 text: "127.0.0.1", or "0.0.0.0" for every interface),
/// 0 when none could be bound (a rendezvous port such as MASTER_PORT).
int free_tcp_port(const char* ip);

} // namespace monkey
