// SPDX-License-Identifier: Apache-2.0
#pragma once
// The router is where a client's request that spans the cluster enters a node: it sends a
// submission to the job's owner (rendezvous hashing of its client key over the members
// that can run it; on a timeout the next one, with the same key), and answers `jobs`,
// `show`, `why`, `logs` and `cancel` by asking this node's coordinator and every other
// alive member and merging their answers (actors/router/listing.hpp). A job named by a
// suffix is resolved across the cluster first (ambiguous: the matches are listed). It
// remembers the rows of its last listing and the jobs it forwarded, so that a job whose
// holders are all down is listed as unavailable rather than silently missing. A node that
// joins through seeds holds its clients' requests until it knows another member (at most
// 5 s): answered from itself alone, they would miss every job the others hold.
//
// Receives: envelope (client verbs from the gateway; requests marked local, from other
// nodes' routers, go to this node's coordinator), (members, list, bool) from the
// membership actor.

#include <caf/fwd.hpp>

#include "runtime/ids.hpp"

namespace monkey {

struct router_config {
  node_id node;
  size_t max_forwards = 4096; ///< submissions being forwarded to owners at once
  size_t max_seen = 200'000;  ///< remembered listing rows
  /// Started with seeds (--join): clients' requests wait until the membership has joined
  /// (a member other than this node is known), at most 5 s.
  bool joining = false;
};

/// `coordinator`: this node's coordinator (the router starts after it and is restarted
/// with it); `tasks`: the task dispatcher (its counts go into `status`).
caf::actor spawn_router(caf::actor_system& sys, router_config cfg, caf::actor coordinator,
                        caf::actor tasks);

} // namespace monkey
