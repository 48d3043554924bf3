// SPDX-License-Identifier: Apache-2.0
#pragma once
// The task dispatcher owns this node's task batches (runtime/tasks.hpp): it accepts a
// batch (one accept record in the journal), hands chunks to the device proxies (at most
// two per slot in flight), and writes the final records of finished tasks in grouped
// journal writes, one in flight at a time. At start it recovers the unfinished tasks.
// docs/tasks.md.
//
// Receives: envelope (tasks submit, tasks, tasks wait), (task_done, chunk_result) from
// device proxies, (shutdown, bool drain) → true once no chunk is in flight (with drain:
// once the queued tasks ran too).

#include <caf/fwd.hpp>

#include "runtime/ids.hpp"

namespace monkey {

struct task_dispatch_config {
  node_id node;
  std::vector<std::string> devices; ///< the device names whose proxies run tasks
  uint32_t task_chunk = 256;        ///< most tasks handed to a device proxy in one message
  int64_t retention_ms = 7LL * 24 * 3600 * 1000; ///< finished batches are forgotten after it
};

/// `devices` is the devices supervisor (actors/device_proxy.hpp): the dispatcher finds the
/// device proxies under it by their device names.
caf::actor spawn_task_dispatch(caf::actor_system& sys, task_dispatch_config cfg,
                               caf::actor journal, caf::actor devices);

} // namespace monkey
