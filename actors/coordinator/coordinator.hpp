// SPDX-License-Identifier: Apache-2.0
#pragma once
// The coordinator is the one writer of this node's job records: the jobs it owns and the
// replicas it holds of other owners' jobs. It accepts submissions (durable on the job's
// holders before they are acknowledged), places queued jobs by priority with EASY
// backfill, starts one worker per attempt, applies retries, requeues and timeouts,
// replicates every transition, adopts the jobs of dead owners, and answers the local job
// verbs. Its rules live in plain classes beside it (job_book, replica_rules,
// anti_entropy, launch_env); its handlers only route messages to them (state.hpp lists
// which file handles what). At start it rebuilds its state from the journal.
//
// Receives: envelope (job verbs from the gateway or the query actor; peer verbs of other
// nodes' coordinators), the worker messages of actors/worker.hpp, (members, list, bool)
// from the membership actor, (fence) → true, (shutdown, bool drain) → true once no job
// runs, (address, string) once the node is published, (tree), (kill, name).

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "devices/device.hpp"
#include "runtime/ids.hpp"
#include "runtime/membership.hpp"
#include "runtime/process/launcher.hpp"
#include "runtime/placement.hpp"

namespace monkey {

struct coordinator_config {
  node_id node;
  uint32_t incarnation = 0;
  std::string data_dir;
  std::string address;
  resources total;
  std::vector<int> gpu_indices;
  std::vector<devices::device_info> devices;
  std::chrono::milliseconds kill_grace{10000};
  int64_t retention_ms = 7LL * 24 * 3600 * 1000;
  /// Checkpoints and shipped bundles in this node's store that no job refers to are
  /// removed once nothing was written to them for this long (--store-keep).
  int64_t store_keep_ms = 24LL * 3600 * 1000;
  std::string cgroup_base; ///< "" when cgroups are not usable
  int32_t pid = 0;
  int64_t started_ms = 0;
  std::string version;
  size_t replicas = 2;       ///< R: members holding each job record
  size_t min_replicas = 1;   ///< fewer alive members than this: submits are refused
  size_t max_queued = 100000; ///< queued jobs beyond this: submits are answered "busy"
  size_t max_forwards = 4096; ///< submissions being forwarded to owners at once
  /// Apps found in --app-dir at start (gossiped with this node's member record).
  std::vector<app_entry> apps;
  std::map<std::string, std::string> app_paths; ///< app name → its executable here
  /// What an app host gets to connect back to this node (docs/writing-apps.md): the
  /// network settings (MONKEY_HEARTBEAT_MS, MONKEY_CONNECTION_TIMEOUT_MS, MONKEY_TLS_*).
  std::map<std::string, std::string> app_host_env;
  std::string node_key; ///< each attempt's key is derived from it (runtime/net/auth.hpp)
  /// The last attempt sequence number given out in this process (attempt ids are node,
  /// incarnation, sequence). Shared by every copy of the config, so a restarted coordinator
  /// goes on from where the one before it stopped instead of from 0; a new process has a
  /// new incarnation. So an attempt id names one attempt for the life of the data
  /// directory (its log folder, checkpoint pieces and gang parts are named by it).
  std::shared_ptr<std::atomic<uint64_t>> attempt_seq = std::make_shared<std::atomic<uint64_t>>(0);
};

caf::actor spawn_coordinator(caf::actor_system& sys, coordinator_config cfg, caf::actor journal,
                             std::shared_ptr<launcher> launch);

} // namespace monkey
