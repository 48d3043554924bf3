// SPDX-License-Identifier: Apache-2.0
#pragma once
// Reading another process's memory with one kernel copy (CMA: process_vm_readv), for sends
// by address (frame.hpp, frame_by_addr) and the all-reduce over tensors that are not
// registered (comm_direct.cpp). Whether a peer may be read is proven at set-up
// (transport.hpp, peer_memory). Plain C++ (Linux).

#include <cstdint>
#include <vector>

#include "monkey/sdk/tensor.hpp"
#include "runtime/expected.hpp"

namespace monkey::dp::cma {

/// The process id that names this process's own memory (a rank of the same process: memcpy).
constexpr int32_t same_process = -1;

/// The largest tensor read by CMA (MONKEY_DP_CMA_MAX_MB, 32 MB): larger ones move faster
/// through the rings, where both processes copy at once. Sends by address and the all-reduce
/// in place share it, so every member of a group decides alike.
uint64_t max_bytes();

/// Copies `n` bytes at `addr` in process `pid` to `dst` (a short read goes on where it
/// stopped); the failure says why ("its process went away (process_vm_readv: No such
/// process)").
status read(int32_t pid, uint64_t addr, void* dst, uint64_t n);

/// dst[k] += the `count` elements of `t` at `addr` in process `pid`, read in pieces through
/// `scratch` (which stays in the cache).
status add(int32_t pid, uint64_t addr, dtype t, void* dst, uint64_t count,
           std::vector<uint8_t>& scratch);

} // namespace monkey::dp::cma
