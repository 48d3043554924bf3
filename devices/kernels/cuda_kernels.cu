// SPDX-License-Identifier: Apache-2.0
// CUDA measurement and self-test (cuBLAS and a kernel); built only when nvcc is found and
// linked only into monkey-measure and the tests, so the runtime does not load cuBLAS.
#include "devices/device.hpp"

#include <algorithm>
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <vector>

namespace monkey::devices {

namespace {

__global__ void saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = a * x[i] + y[i];
}

struct device_buffer {
  float* ptr = nullptr;
  ~device_buffer() {
    if (ptr)
      cudaFree(ptr);
  }
};

} // namespace

double measure_gpu_gflops(int index, int n) {
  if (cudaSetDevice(index) != cudaSuccess)
    return 0;
  size_t elems = static_cast<size_t>(n) * n;
  device_buffer a, b, c;
  if (cudaMalloc(&a.ptr, elems * sizeof(float)) != cudaSuccess
      || cudaMalloc(&b.ptr, elems * sizeof(float)) != cudaSuccess
      || cudaMalloc(&c.ptr, elems * sizeof(float)) != cudaSuccess)
    return 0;
  cudaMemset(a.ptr, 0, elems * sizeof(float));
  cudaMemset(b.ptr, 0, elems * sizeof(float));
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS)
    return 0;
  float alpha = 1, beta = 0;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  double best = 0;
  for (int rep = 0; rep < 6; ++rep) {
    cudaEventRecord(start);
    cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a.ptr, n, b.ptr, n, &beta, c.ptr, n);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    if (rep > 0 && ms > 0)
      best = std::max(best, 2.0 * n * n * static_cast<double>(n) / (ms / 1e3) / 1e9);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cublasDestroy(h);
  return cudaGetLastError() == cudaSuccess ? best : 0;
}

std::string gpu_self_test(int index) {
  if (auto rc = cudaSetDevice(index); rc != cudaSuccess)
    return cudaGetErrorString(rc);
  const int n = 1 << 20;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 100);
    y[i] = 1.0f;
  }
  device_buffer dx, dy;
  if (cudaMalloc(&dx.ptr, n * sizeof(float)) != cudaSuccess
      || cudaMalloc(&dy.ptr, n * sizeof(float)) != cudaSuccess)
    return "cudaMalloc failed";
  cudaMemcpy(dx.ptr, x.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dy.ptr, y.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  saxpy<<<(n + 255) / 256, 256>>>(n, 2.0f, dx.ptr, dy.ptr);
  if (auto rc = cudaGetLastError(); rc != cudaSuccess)
    return std::string("kernel launch: ") + cudaGetErrorString(rc);
  cudaMemcpy(y.data(), dy.ptr, n * sizeof(float), cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; ++i)
    if (y[i] != 2.0f * static_cast<float>(i % 100) + 1.0f)
      return "wrong result at element " + std::to_string(i);
  return {};
}

} // namespace monkey::devices
