// SPDX-License-Identifier: Apache-2.0
#pragma once
// NCCL between GPUs (issue #11; docs/dataplane.md): a communicator over CUDA device memory.
// Built only where nvcc and NCCL exist (devices/CMakeLists.txt); elsewhere every call says
// why it cannot run. Plain C++ over the CUDA runtime and NCCL: no CAF. The ranks agree on
// NCCL's unique id through the data plane (rank 0 makes it, a broadcast hands it out).

#include <cstddef>
#include <memory>
#include <string>

namespace monkey::devices {

/// "" when this build has NCCL and a GPU is present; else why NCCL cannot run here.
std::string nccl_unavailable();

/// A new communicator's unique id (NCCL's 128 bytes), made by one rank and given to all;
/// empty (and `why`) when NCCL cannot run.
std::string nccl_unique_id(std::string* why);

class nccl_comm {
public:
  /// Joins rank `rank` of `world` on CUDA device `device` (blocks until every rank joined).
  static std::unique_ptr<nccl_comm> create(const std::string& unique_id, int rank, int world,
                                           int device, std::string* why);
  ~nccl_comm();
  nccl_comm(const nccl_comm&) = delete;
  nccl_comm& operator=(const nccl_comm&) = delete;

  /// In-place all-reduce of `count` floats in device memory (sum, or mean), waited for:
  /// "" when done, else the CUDA or NCCL error.
  std::string allreduce_f32(float* device_data, size_t count, bool mean);

  struct impl;

private:
  explicit nccl_comm(std::unique_ptr<impl> p);
  std::unique_ptr<impl> p_;
};

/// One rank on device `index`: `count` floats (k % 7) all-reduced by NCCL and checked on
/// the host. "" when right, else what went wrong (also when NCCL cannot run).
std::string nccl_smoke_test(int index, size_t count);

} // namespace monkey::devices
