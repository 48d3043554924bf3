// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the data plane's tests compare against (comm.test.cpp, tests/dp_ranks.cpp): inputs
// that differ per rank and element, of mixed magnitudes (so that the order of a float sum
// shows), and the ring's sum computed in the ring's own order, bit for bit.

#include <cstdint>
#include <vector>

#include "runtime/dataplane/comm.hpp"

namespace monkey::dp::reference {

/// Rank `rank`'s input element `k` (for a test named by `salt`).
inline float value(int32_t rank, uint64_t k, uint32_t salt) {
  uint64_t x = (k + 1) * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(rank) + 1) * 0xC2B2AE3D27D4EB4Full
               ^ salt * 0x165667B19E3779F9ull;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  auto mant = static_cast<float>(x & 0xFFFFF) / static_cast<float>(0xFFFFF); // [0, 1]
  float scale = static_cast<float>(1u << ((x >> 20) % 12));                   // 1 .. 2048
  return (x >> 40) & 1 ? mant * scale : -mant * scale;
}

/// The chunk of the ring that holds element `k` of `total` over `n` members.
inline int chunk_of(uint64_t total, int n, uint64_t k) {
  auto un = static_cast<uint64_t>(n);
  auto base = total / un, extra = total % un;
  if (k < extra * (base + 1))
    return static_cast<int>(k / (base + 1));
  return static_cast<int>(extra + (k - extra * (base + 1)) / base);
}

/// Element `k` of the ring all-reduce (sum; mean when `mean`) over `group` (group order).
inline float ring_sum(const std::vector<int32_t>& group, uint64_t total, uint64_t k, uint32_t salt,
                      bool mean = false) {
  int n = static_cast<int>(group.size());
  int c = chunk_of(total, n, k);
  int start = ring_sum_start(c, n);
  float acc = value(group[static_cast<size_t>(start)], k, salt);
  for (int j = 1; j < n; ++j)
    acc = acc + value(group[static_cast<size_t>((start + j) % n)], k, salt);
  return mean ? acc / static_cast<float>(n) : acc;
}

} // namespace monkey::dp::reference
