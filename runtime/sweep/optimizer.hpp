// SPDX-License-Identifier: Apache-2.0
#pragma once
// The optimizer protocol (issue #13; docs/sweeps.md): one interface for every search
// algorithm — suggest a trial, observe an intermediate result (answer: go on or stop),
// observe the final result — with its whole state saved as text so that a node that adopts
// a sweep goes on where the last one was. Seeded: the same seed and the same order of
// results give the same decisions. Built: `grid`, `random`, `tpe`, `asha`, `hyperband` and
// `pbt`. Plain C++: no CAF (sweep.test.cpp).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "runtime/expected.hpp"
#include "runtime/sweep/space.hpp"
#include "runtime/sweep/sweep_spec.hpp"

namespace monkey::sweep {

/// What a suggestion says.
struct suggestion {
  enum kind {
    trial,   ///< run a trial with `params`
    wait,    ///< nothing now: ask again after a result
    done,    ///< the algorithm has nothing more to run (a finished grid)
  } what = done;
  assignment params;
};

/// What an intermediate result asks of its trial.
enum class verdict {
  go_on,
  stop,    ///< end it now (it ends `stopped`)
  exploit, ///< PBT: continue from trial `from`'s newest checkpoint with `params` instead
};
struct decision {
  verdict what = verdict::go_on;
  int64_t from = -1;
  assignment params;
  decision(verdict v = verdict::go_on) : what(v) {} // NOLINT: a plain verdict converts
  bool operator==(verdict v) const { return what == v; }
  bool operator!=(verdict v) const { return what != v; }
};

class optimizer {
public:
  virtual ~optimizer() = default;
  /// The next trial (its id is the caller's: the n-th suggestion is trial n, from 0).
  virtual suggestion suggest() = 0;
  /// An intermediate value of trial `id` at `step` (of the algorithm's resource).
  virtual decision observe(int64_t id, int64_t step, double value) = 0;
  /// Trial `id` ended: its value (the metric's last or best point), or none (it failed or
  /// reported nothing).
  virtual void finish(int64_t id, std::optional<double> value) = 0;
  /// Trial `id` (already suggested) runs with `params` instead of what was suggested: a
  /// driver that went on from an older saved state found the trial already started with
  /// the parameters of a suggestion made after that state (runner.cpp). Algorithms that
  /// model their trials' parameters (tpe, pbt) take them; the others need nothing.
  virtual void adopt(int64_t /*id*/, const assignment& /*params*/) {}
  /// The whole state, as text (JSON), and back.
  virtual std::string save() const = 0;
  virtual status restore(const std::string& state) = 0;
};

/// The optimizer a sweep asks for; an algorithm not built yet is an error naming it.
expected<std::unique_ptr<optimizer>> make_optimizer(const sweep_spec& s);

} // namespace monkey::sweep
