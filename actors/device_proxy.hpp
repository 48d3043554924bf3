// SPDX-License-Identifier: Apache-2.0
#pragma once
// A device proxy stands for one device of the node (cpu0, cuda0, ...): it advertises what
// the device is (kind, model, memory, slots, measured speed) and how many of its slots
// are free, and runs task chunks on its task workers, one per slot. Task workers are
// detached actors (a thread each), so a long task never blocks the cooperative scheduler
// that the coordinator, the gateway and the network run on.
//
// Receives:
//   (run_tasks, task_chunk)    from the task dispatcher; queued when every slot is busy
//   (info)                     → std::string: msgpack device_row (client protocol)
//   (tree)                     → std::string: msgpack tree_node of itself and its workers
// Sends to the sender of the chunk: (task_done, chunk_result).
// A task worker that dies is replaced, and its chunk runs again (at-least-once; the
// task dispatcher records each task's final state once).

#include <caf/fwd.hpp>

#include "devices/device.hpp"

namespace monkey {

caf::actor spawn_device_proxy(caf::actor_system& sys, devices::device_info info);

/// The devices supervisor: one_for_one over one proxy per device, named after it.
caf::actor spawn_device_supervisor(caf::actor_system& sys,
                                   const std::vector<devices::device_info>& devs);

} // namespace monkey
