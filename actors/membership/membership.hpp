// SPDX-License-Identifier: Apache-2.0
#pragma once
// The membership actor: joins the cluster through any seed, probes one member per
// period (SWIM: ping, then ping-req through others, then suspicion), spreads changes by
// piggybacking them on its probes and acks, and watches every peer connection: a lost
// connection is re-probed at once, and a refused reconnection confirms the death (kill -9
// is declared in milliseconds). Talks to other nodes only through their gateways, after
// proving the cluster secret to each (the same challenge-response as clients).
// Registered as "membership" in the actor registry, where the gateway finds it.
// Protocol: docs/cluster.md.
//
// Receives: envelopes with verbs nodes, peer_join, peer_ping, peer_ping_req (from the
// gateway); (shutdown) → true after announcing a planned leave.

#include <chrono>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "runtime/membership.hpp"

namespace monkey {

constexpr char membership_name[] = "membership";

struct membership_config {
  member self;                    ///< node, address, incarnation, pid, devices
  std::string secret;
  std::vector<std::string> seeds; ///< host:port of members to join through
  std::chrono::milliseconds probe_interval{200};
  std::chrono::milliseconds ping_timeout{400};
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds suspicion_timeout{1500};
  size_t indirect_probes = 2;
};

caf::actor spawn_membership(caf::actor_system& sys, membership_config cfg);

} // namespace monkey
