// SPDX-License-Identifier: Apache-2.0
#pragma once
// What a node can offer: its CPU and its CUDA GPUs. Plain C++: no CAF. CUDA code stays in
// this folder and is built only when nvcc is found.

#include <cstdint>
#include <string>
#include <vector>

namespace monkey::devices {

struct device_info {
  std::string name;  ///< "cpu0", "cuda0", ...
  std::string kind;  ///< "cpu" or "cuda"
  std::string model; ///< CPU model name or GPU name
  int32_t slots = 0; ///< cpus for the CPU, 1 for a GPU
  int64_t memory_mb = 0;
  double gflops = 0; ///< measured GEMM speed; 0 when not measured
  int32_t index = -1; ///< CUDA device index
};

/// Discovers the CPU (cores, memory, model).
device_info discover_cpu();

/// Discovers CUDA GPUs; any CUDA error, a missing driver or a build without CUDA
/// gives none, and `why_none` says why.
std::vector<device_info> discover_gpus(std::string* why_none);

/// True when this build includes the CUDA code.
bool built_with_cuda();

// The measurements below live in monkey::device_kernels (OpenBLAS, cuBLAS), which only
// monkey-measure and the tests link.

/// Single-precision GEMM speed of the CPU through OpenBLAS with `threads` threads: best
/// of a few n×n multiplications, in GFLOP/s.
double measure_cpu_gflops(int threads, int n = 1024);

/// cuBLAS SGEMM speed of CUDA device `index` in GFLOP/s; 0 on any CUDA error or in a
/// build without CUDA.
double measure_gpu_gflops(int index, int n = 4096);

/// Runs a small kernel (saxpy) on device `index` and checks its result on the host:
/// "" when right, else what went wrong.
std::string gpu_self_test(int index);

} // namespace monkey::devices
