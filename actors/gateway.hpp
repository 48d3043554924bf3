// SPDX-License-Identifier: Apache-2.0
#pragma once
// The gateway is the actor a node publishes for clients (CLI, console). A client first
// proves it knows the cluster secret (hello → nonce; auth → HMAC proof, answered with the
// node's own proof); only then are its envelopes passed on: `tree` and `kill` to the
// node's root supervisor, everything else to the coordinator. The root is found in the
// actor registry; the coordinator is asked of the root ("core/coordinator"), cached and
// monitored, so a restarted coordinator is found without restarting the gateway. Each
// client is known by its actor address and forgotten when it goes down.

#include <string>

#include <caf/fwd.hpp>

namespace monkey {

/// Registry name (atom) of the node's root supervisor, and the coordinator's path in it.
constexpr const char* root_supervisor_name = "node_sup";
constexpr const char* coordinator_path = "core/coordinator";

caf::actor spawn_gateway(caf::actor_system& sys, std::string secret, std::string node);

} // namespace monkey
