// SPDX-License-Identifier: Apache-2.0
// The ring schedule (comm.hpp; pure, comm.test.cpp): which chunk each member sends and
// receives at each step, and where a chunk's sum starts.
#include <algorithm>

#include "runtime/dataplane/comm.hpp"

namespace monkey::dp {

span ring_chunk(uint64_t total, int n, int c) {
  auto un = static_cast<uint64_t>(n);
  auto uc = static_cast<uint64_t>(c);
  auto base = total / un, extra = total % un;
  span s;
  s.count = base + (uc < extra ? 1 : 0);
  s.first = uc * base + std::min(uc, extra);
  return s;
}

namespace {
int mod(int a, int n) {
  return ((a % n) + n) % n;
}
} // namespace

ring_step reduce_scatter_step(int i, int n, int s) {
  return {mod(i - s - 1, n), mod(i - s - 2, n)};
}

ring_step allgather_step(int i, int n, int s) {
  return {mod(i - s, n), mod(i - s - 1, n)};
}

int ring_sum_start(int c, int n) {
  return mod(c + 1, n);
}

} // namespace monkey::dp
