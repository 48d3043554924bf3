// SPDX-License-Identifier: Apache-2.0
#pragma once
// Exit codes with a meaning between an app host and the node that started it.

namespace monkey {

/// An app host of a gang across nodes exits with this when a rank failed and the app's
/// policy is `gang` (within its restart budget): the owner then starts the whole gang again
/// as a new attempt, from its newest complete checkpoint, without charging a retry (the
/// requeue budget, --max-requeues, bounds it). 75 is EX_TEMPFAIL.
constexpr int gang_restart_exit = 75;

} // namespace monkey
