// SPDX-License-Identifier: Apache-2.0
// CUDA discovery (CUDA runtime only); built only when nvcc is found. Any CUDA error means
// "no GPU" (never a crash): a machine without a driver reports cudaErrorInsufficientDriver.
#include "devices/device.hpp"

#include <algorithm>
#include <cuda_runtime.h>
#include <vector>

namespace monkey::devices {

bool built_with_cuda() {
  return true;
}

std::vector<device_info> discover_gpus(std::string* why_none) {
  std::vector<device_info> out;
  int count = 0;
  auto rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    if (why_none)
      *why_none = std::string("CUDA reports no usable GPU (") + cudaGetErrorString(rc) + ")";
    cudaGetLastError();
    return out;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess)
      continue;
    device_info d;
    d.name = "cuda" + std::to_string(i);
    d.kind = "cuda";
    d.model = prop.name;
    d.slots = 1;
    d.memory_mb = static_cast<int64_t>(prop.totalGlobalMem / (1024 * 1024));
    d.index = i;
    out.push_back(d);
  }
  if (out.empty() && why_none)
    *why_none = "CUDA found no devices";
  return out;
}

} // namespace monkey::devices
