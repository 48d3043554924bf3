// SPDX-License-Identifier: Apache-2.0
#pragma once
// Fault injection for tests, the chaos soak and benchmarks: read once from the environment
// variable MONKEY_FAULTS, a comma-separated list of KEY=VALUE (docs/testing.md):
//   journal_delay=300ms     every journal commit waits this long first (a slow fsync)
//   journal_jitter=200ms    plus a random 0..jitter on top of it
//   journal_fail_if=PATH    every journal commit fails while PATH exists (a full disk)
// Unknown keys or bad values are reported by parse_faults, and the runtime refuses to start.
// Without the variable nothing is injected and the checks cost one branch.

#include <chrono>
#include <string>

#include "runtime/expected.hpp"

namespace monkey {

struct fault_settings {
  std::chrono::milliseconds journal_delay{0};
  std::chrono::milliseconds journal_jitter{0};
  std::string journal_fail_if;
  bool any() const {
    return journal_delay.count() > 0 || journal_jitter.count() > 0 || !journal_fail_if.empty();
  }
};

/// Parses a MONKEY_FAULTS value; names the key or value that is wrong.
expected<fault_settings> parse_faults(const std::string& text);

/// The process's faults (parsed from MONKEY_FAULTS at the first call; none when unset or
/// invalid: the runtime checks the variable with parse_faults at start and refuses bad ones).
const fault_settings& faults();

/// Journal hook: sleeps for the configured delay and answers a non-empty sentence when the
/// commit must fail. Called on the journal actor's own thread, before SQLite.
status journal_fault();

} // namespace monkey
