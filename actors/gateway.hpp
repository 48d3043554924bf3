// SPDX-License-Identifier: Apache-2.0
#pragma once
// The gateway is the actor a node publishes for clients (CLI, console). A client first
// proves it knows the cluster secret (hello → nonce; auth → HMAC proof, answered with the
// node's own proof); only then are its envelopes passed on to the coordinator. Each
// client is known by its actor address and forgotten when it goes down.

#include <string>

#include <caf/fwd.hpp>

namespace monkey {

caf::actor spawn_gateway(caf::actor_system& sys, std::string secret, std::string node,
                         caf::actor coordinator);

} // namespace monkey
