// SPDX-License-Identifier: Apache-2.0
#pragma once
// The front door of a node. The **front** is the actor a node publishes on its port, once,
// for its whole life: it passes every message on to the current gateway (found through
// the root supervisor and cached), so a restarted gateway needs no new publish (a
// republish on the same port raced with the unpublish of the old one and failed).
//
// The **gateway** authenticates every session: hello (the session names its role: client,
// node or app) → nonce; auth → an HMAC proof with that role's key, answered with the
// node's own proof. Afterwards each envelope is checked against the session's role
// (actors/gateway/access.hpp; a peer verb from a client is refused and logged) and passed
// to the actor that answers it: the membership, the root supervisor (tree, kill), or
// core/tasks, core/coordinator, core/router (asked of the root, cached and monitored, so a
// restarted one is found without restarting the gateway). Each session is known by its
// actor address and forgotten when it goes down.

#include <string>

#include <caf/fwd.hpp>

namespace monkey {

/// Registry name (atom) of the node's root supervisor, and the paths of its actors.
constexpr char root_supervisor_name[] = "node_sup";
constexpr const char* coordinator_path = "core/coordinator";
constexpr const char* router_path = "core/router";
constexpr const char* tasks_path = "core/tasks";
constexpr const char* checkpoints_path = "core/checkpoints";

caf::actor spawn_gateway(caf::actor_system& sys, std::string secret, std::string node);

/// The published front: forwards everything to the gateway under the root supervisor.
caf::actor spawn_front(caf::actor_system& sys);

} // namespace monkey
