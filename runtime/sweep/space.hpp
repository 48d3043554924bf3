// SPDX-License-Identifier: Apache-2.0
#pragma once
// A search space's points (issue #13; docs/sweeps.md): drawing them at random (seeded:
// the same points on every machine), enumerating the grid, and filling a trial's command
// placeholders. Plain C++: no CAF (space.test.cpp).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/expected.hpp"
#include "runtime/sweep/sweep_spec.hpp"

namespace monkey::sweep {

/// A trial's parameters, as text (what `--set` and `{name}` take). A conditional parameter
/// whose condition does not hold is absent.
using assignment = std::map<std::string, std::string>;

/// A seeded generator whose whole state is one number (an optimizer journals it).
struct rng {
  uint64_t state = 0;
  uint64_t next();
  double uniform(); ///< [0, 1), 53 bits
  /// An index in [0, n).
  size_t below(size_t n);
};

/// A float as a parameter's text: the shortest form that reads back to the same double.
std::string value_text(double v);

/// A float value of `p` kept to 6 significant digits within [low, high] (a hyperparameter
/// as a person writes it, passed to the trial exactly as recorded); an int's rounded.
double rounded(const param_space& p, double v);

/// Whether `p`'s condition holds for the parameters drawn before it.
bool active(const param_space& p, const assignment& before);

/// One value of `p` drawn from `g` (grid parameters are drawn like choices).
std::string draw(const param_space& p, rng& g);

/// A point of the space drawn from `g`, in the space's order.
assignment sample(const std::vector<param_space>& space, rng& g);

/// Every point of a space of grid and choice parameters, in order (the first parameter
/// slowest); conditional parameters only where they apply. At most `limit` points, else
/// an error saying how many there would be.
expected<std::vector<assignment>> grid_points(const std::vector<param_space>& space,
                                              size_t limit = 100000);

/// `command` with every `{name}` of a parameter in `names` replaced by its value in `a`
/// (by "" when absent: a conditional parameter that does not apply); other braces stay.
std::vector<std::string> fill(const std::vector<std::string>& command, const assignment& a,
                              const std::vector<std::string>& names);

/// "lr=0.01 hidden=256": a point as one line.
std::string assignment_text(const assignment& a);

} // namespace monkey::sweep
