// SPDX-License-Identifier: Apache-2.0
#pragma once
// A gang command job's runner on one node (`monkey submit --workers N -- CMD`): what the
// worker starts instead of CMD itself, as `monkey-runtime __gang N -- CMD...`. It starts N
// copies of CMD with the environment torchrun gives (RANK, LOCAL_RANK, WORLD_SIZE,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, plus MONKEY_RANK), writes each rank's output to
// its rank log (and rank 0's to its own stdout), passes every rank's MONKEY_METRIC lines on
// with `rank=R`, and ends like torchrun: when a rank fails the others are stopped (SIGTERM,
// SIGKILL after the grace) and the runner exits with that rank's status. Plain C++: no CAF;
// gang.test.cpp.

#include <string>
#include <vector>

namespace monkey {

/// `argv` after `__gang`: N, [--ranks LIST --group G --master HOST:PORT], "--", CMD, ARGS...
/// With --ranks the runner is one node's part of a gang across nodes: it starts those ranks
/// only (LOCAL_RANK and LOCAL_WORLD_SIZE within the part, GROUP_RANK = G, MASTER_ADDR and
/// MASTER_PORT as given). Returns the exit code (128 + signal for a rank killed by a signal).
int run_gang(const std::vector<std::string>& args);

/// A rank's MONKEY_METRIC line with `rank=R` added (other lines: unchanged, `false`).
bool tag_metric_line(const std::string& line, int rank, std::string& out);

} // namespace monkey
