// SPDX-License-Identifier: Apache-2.0
#pragma once
// Who may send which verb, and which of the node's actors answers it. Plain C++: no CAF;
// access.test.cpp. The gateway asks these two functions for every envelope.

#include "runtime/net/auth.hpp"
#include "runtime/wire/messages/client.hpp"

namespace monkey {

/// The actor of a node that answers a verb.
enum class destination {
  gateway,     ///< hello, auth
  membership,  ///< nodes and the membership protocol
  root,        ///< tree, kill (the root supervisor)
  tasks,       ///< task batches (core/tasks)
  coordinator, ///< node-to-node record verbs (core/coordinator)
  router,      ///< jobs and everything else a client asks (core/router)
  checkpoints, ///< checkpoint pieces between nodes (core/checkpoints)
};

destination route_of(verb v);

/// Whether a session that proved role `r` may send verb `v`. Clients send client verbs;
/// nodes send the node-to-node verbs and the queries routers forward to each other; app
/// hosts send only the app SDK's verbs.
bool verb_allowed(role r, verb v);

} // namespace monkey
