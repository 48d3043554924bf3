// SPDX-License-Identifier: Apache-2.0
#pragma once
// Assembles one node's supervision tree:
//
//   node (one_for_one)
//   ├── core (rest_for_one)        a journal restart restarts what comes after it
//   │   ├── journal
//   │   ├── devices (one_for_one)  one device proxy per device, each with a task worker per slot
//   │   ├── tasks                  task batches (actors/tasks)
//   │   ├── coordinator            lists its workers; restarted, it recovers from the journal
//   │   ├── router                 client requests that span the cluster (actors/router)
//   │   └── checkpoints            checkpoint store and blob server (actors/checkpoints)
//   ├── gateway                    authenticates sessions, routes their verbs
//   └── membership                 SWIM membership; registered as "membership"
//
// The front (actors/gateway) is published on the node's port once, outside the tree: it
// passes everything to the current gateway. The root is registered as "node_sup" in the
// actor registry, where the gateway and the front find it.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>

#include "actors/checkpoints.hpp"
#include "actors/coordinator/coordinator.hpp"
#include "runtime/expected.hpp"
#include "runtime/journal/journal.hpp"
#include "runtime/process/launcher.hpp"

namespace monkey {

struct node_setup {
  coordinator_config coordinator;
  std::shared_ptr<journal> store;
  std::shared_ptr<launcher> launch;
  std::string secret;
  std::string host = "127.0.0.1"; ///< "" or "0.0.0.0": all interfaces
  uint16_t port = 0;
  std::string advertise;          ///< host:port other nodes reach this one at ("": the bound one)
  std::string name;               ///< --name ("": the host name and the bound port)
  std::vector<std::string> seeds; ///< members to join through (--join)
  std::chrono::milliseconds suspicion_timeout{1500};
  uint32_t task_chunk = 256;      ///< most tasks handed to a device proxy in one message
  checkpoints_config checkpoints; ///< the checkpoint store and its blob server
};

struct node_handles {
  caf::actor root;
  caf::actor front;  ///< the published actor
  uint16_t port = 0; ///< bound port
};

/// Starts the tree and publishes the gateway; a failure names what went wrong.
expected<node_handles> start_node(caf::actor_system& sys, node_setup setup);

/// The coordinator now running under `root` (null when none).
caf::actor current_coordinator(caf::actor_system& sys, const caf::actor& root);

} // namespace monkey
