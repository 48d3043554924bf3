// SPDX-License-Identifier: Apache-2.0
#pragma once
// NCCL between GPUs (issue #11; docs/dataplane.md, "NCCL"): a communicator over CUDA device
// memory. Built only where nvcc and NCCL exist (devices/CMakeLists.txt); elsewhere every call
// says why it cannot run. Plain C++ over the CUDA runtime and NCCL: no CAF. The app SDK's
// tensors::gpu_join (apps/sdk/gpu.cpp) has the ranks agree on NCCL's unique id through the
// data plane (the group's first rank makes it, a broadcast hands it out).
//
// The communicator runs NCCL non-blocking: while it waits (for the other ranks to join, for
// a collective to end) it polls, asks `check` whether every member is still there, and
// gives up after `timeout`; either way it aborts the NCCL communicator (ncclCommAbort), so a
// dead or frozen rank fails the others instead of hanging them, and every later call fails
// with the same reason.

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "monkey/sdk/tensor.hpp"

namespace monkey::devices {

/// "" when this build has NCCL and a GPU is present (CUDA device `device`, when not -1);
/// else why NCCL cannot run here.
std::string nccl_unavailable(int device = -1);

/// A new communicator's unique id (NCCL's 128 bytes), made by one rank and given to all;
/// empty (and `why`) when NCCL cannot run.
std::string nccl_unique_id(std::string* why);

/// Asked while NCCL waits: "" while every member is there, else why not (the wait aborts).
using nccl_check = std::function<std::string()>;

class nccl_comm {
public:
  /// Joins rank `rank` of `world` on CUDA device `device`: returns when every rank joined,
  /// or null with `why` (no GPU, a bad id, an NCCL error, `check`'s reason, or nobody
  /// joined within `timeout`; zero: no limit).
  static std::unique_ptr<nccl_comm> create(const std::string& unique_id, int rank, int world,
                                           int device, std::string* why,
                                           const nccl_check& check = {},
                                           std::chrono::milliseconds timeout = {});
  ~nccl_comm();
  nccl_comm(const nccl_comm&) = delete;
  nccl_comm& operator=(const nccl_comm&) = delete;

  /// In-place all-reduce of `count` elements of `t` in device memory (sum, or mean for the
  /// floating types), on the communicator's own stream: work that wrote the data on another
  /// stream must be synchronized first. Waited for: "" when done, else the CUDA or NCCL error, `check`'s
  /// reason or the timeout (zero: none). After a failure the communicator is aborted and
  /// every later call fails with the first reason.
  std::string allreduce(void* device_data, size_t count, dp::dtype t, bool mean,
                        const nccl_check& check = {}, std::chrono::milliseconds timeout = {});
  std::string allreduce_f32(float* device_data, size_t count, bool mean) {
    return allreduce(device_data, count, dp::dtype::f32, mean);
  }
  int device() const;

  struct impl;

private:
  explicit nccl_comm(std::unique_ptr<impl> p);
  std::unique_ptr<impl> p_;
};

/// One rank on device `index`: `count` floats (k % 7) all-reduced by NCCL and checked on
/// the host. "" when right, else what went wrong (also when NCCL cannot run).
std::string nccl_smoke_test(int index, size_t count);

} // namespace monkey::devices
