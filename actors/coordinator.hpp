// SPDX-License-Identifier: Apache-2.0
#pragma once
// The coordinator owns this node's jobs: it accepts submissions (durable in the journal
// before they are acknowledged), places queued jobs by priority with EASY backfill,
// starts one worker per attempt, applies retries, requeues and timeouts, and answers the
// client verbs. At start (and after a restart) it rebuilds its state from the journal:
// attempts of an earlier incarnation are killed and requeued as lost.
//
// Tasks (runtime/tasks.hpp) go the light way: one accept record per batch, chunks handed
// to the device proxies (at most two per slot in flight), final records grouped into one
// journal write at a time.
//
// Receives: envelope (client verbs, from the gateway), the worker messages of
// actors/worker.hpp, (task_done, chunk_result) from device proxies, (shutdown, bool drain)
// → true once no job runs, (address, string) once the node is published.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "devices/device.hpp"
#include "runtime/ids.hpp"
#include "runtime/launcher.hpp"
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
  std::string cgroup_base; ///< "" when cgroups are not usable
  int32_t pid = 0;
  int64_t started_ms = 0;
  std::string version;
  uint32_t task_chunk = 256; ///< most tasks handed to a device proxy in one message
  size_t replicas = 2;       ///< R: members holding each job record
  size_t min_replicas = 1;   ///< fewer alive members than this: submits are refused
  size_t max_queued = 100000; ///< queued jobs beyond this: submits are answered "busy"
  size_t max_forwards = 4096; ///< submissions being forwarded to owners at once
};

/// `devices` is the devices supervisor (actors/device_proxy.hpp): the coordinator finds
/// the device proxies under it by their device names.
caf::actor spawn_coordinator(caf::actor_system& sys, coordinator_config cfg, caf::actor journal,
                             caf::actor devices, std::shared_ptr<launcher> launch);

} // namespace monkey
