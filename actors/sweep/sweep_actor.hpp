// SPDX-License-Identifier: Apache-2.0
#pragma once
// A sweep's optimizer actor (issue #13; docs/sweeps.md, "How a sweep runs"). A sweep is a
// driver job (`job_spec::driver`): journaled, replicated to its holders, owned by one node
// and adopted by a surviving holder like any job. The node that runs an attempt of it runs
// no process: its worker spawns this actor instead of a child, and the actor runs the
// sweep's optimizer and its rounds (runtime/sweep/drive.hpp) inside the node. It asks the
// node's router for what it needs (submit, list, show, cancel: the verbs a client sends)
// and talks to its worker as a child process does to its: progress and checkpoint lines in
// the attempt's stdout file (the worker journals the points and saves the checkpoint
// directory), lines for the user in its stderr file, and its end as an exit code.
//
// The actor runs on a thread of its own (detached): a round waits for its answers, and no
// other actor's thread is held meanwhile.
//
// Sends to its worker:
//   (exited, exit_info)   the attempt's end (exit code 0 finished, 143 stopped, 75 the
//                         cluster did not answer for 30 s, 64 a sweep that does not read)
// Receives:
//   (stop, std::string why)  "requeued" (its node shuts down): end at once, the trials
//                         running on (the job's next attempt follows them); otherwise
//                         (cancelled, timeout): stop the running trials, start no more, end
// It ends with its worker (monitored): a worker that dies leaves no optimizer running.

#include <atomic>
#include <memory>

#include <caf/fwd.hpp>

#include "runtime/process/launcher.hpp"

namespace monkey {

/// Set by the worker when the attempt is over for the actor whatever it is doing (requeued,
/// killed after the grace period, the worker gone): a round in progress then fails at its
/// next request instead of going on with a stale attempt's submits and stops, and the
/// actor handles its stop or its worker's down at once.
using abandon_flag = std::shared_ptr<std::atomic<bool>>;

/// `req`: the attempt's launch request as the worker would start a child with it (its
/// environment, working directory and stdout/stderr files).
caf::actor spawn_sweep_actor(caf::actor_system& sys, launch_request req, caf::actor worker,
                             abandon_flag abandoned);

} // namespace monkey
