// SPDX-License-Identifier: Apache-2.0
// The CUDA training kernels (devices/compute.hpp): cuBLAS for GEMM, small kernels for the
// rest, all on one stream. Built only when nvcc is found; run where a GPU is present.
// compute.test.cpp checks them against the CPU's.
#include "devices/compute.hpp"

#include <cmath>
#include <new>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace monkey::devices {

namespace {

constexpr int threads_per_block = 256;

unsigned blocks_for(size_t n) {
  return static_cast<unsigned>((n + threads_per_block - 1) / threads_per_block);
}

__global__ void k_bias_add(float* y, const float* b, int rows, int cols) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < static_cast<size_t>(rows) * cols)
    y[i] += b[i % cols];
}

/// One thread per column, summing down the rows in order (the CPU's order: same sums).
__global__ void k_bias_grad(const float* dy, float* db, int rows, int cols) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols)
    return;
  float s = 0;
  for (int r = 0; r < rows; ++r)
    s += dy[static_cast<size_t>(r) * cols + c];
  db[c] = s;
}

__global__ void k_relu(float* y, size_t n) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n)
    y[i] = y[i] > 0.0f ? y[i] : 0.0f;
}

__global__ void k_relu_grad(const float* y, float* dy, size_t n) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n && !(y[i] > 0.0f))
    dy[i] = 0.0f;
}

/// One thread per row: its loss and whether its top logit is the label; dlogits.
__global__ void k_softmax_xent(const float* logits, const int32_t* labels, int rows, int cols,
                               float scale, float* dlogits, double* loss, int* correct) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows)
    return;
  const float* z = logits + static_cast<size_t>(r) * cols;
  int best = 0;
  float top = z[0];
  for (int c = 1; c < cols; ++c)
    if (z[c] > top) {
      top = z[c];
      best = c;
    }
  double sum = 0;
  for (int c = 0; c < cols; ++c)
    sum += exp(static_cast<double>(z[c] - top));
  int label = labels[r];
  loss[r] = log(sum) - static_cast<double>(z[label] - top);
  correct[r] = best == label;
  if (dlogits) {
    float* d = dlogits + static_cast<size_t>(r) * cols;
    for (int c = 0; c < cols; ++c) {
      float p = static_cast<float>(exp(static_cast<double>(z[c] - top)) / sum);
      d[c] = (p - (c == label ? 1.0f : 0.0f)) * scale;
    }
  }
}

__global__ void k_sgd(float* w, float* v, const float* g, size_t n, float lr, float momentum,
                      float wd) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) {
    float step = momentum * v[i] + (g[i] + wd * w[i]);
    v[i] = step;
    w[i] = w[i] - lr * step;
  }
}

__global__ void k_axpy(float a, const float* x, float* y, size_t n) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n)
    y[i] = a * x[i] + y[i];
}

__global__ void k_scale(float a, float* x, size_t n) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n)
    x[i] = a * x[i];
}

__global__ void k_fill(float* x, float v, size_t n) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n)
    x[i] = v;
}

class cuda_compute final : public compute {
public:
  cuda_compute(int index, std::string model) : index_(index), model_(std::move(model)) {}
  ~cuda_compute() override {
    cudaSetDevice(index_);
    if (blas_)
      cublasDestroy(blas_);
    if (stream_)
      cudaStreamDestroy(stream_);
    if (loss_)
      cudaFree(loss_);
    if (correct_)
      cudaFree(correct_);
  }

  bool init(std::string* why) {
    if (cudaSetDevice(index_) != cudaSuccess || cudaStreamCreate(&stream_) != cudaSuccess) {
      *why = std::string("CUDA: ") + cudaGetErrorString(cudaGetLastError());
      return false;
    }
    if (cublasCreate(&blas_) != CUBLAS_STATUS_SUCCESS) {
      *why = "cuBLAS could not start on cuda" + std::to_string(index_);
      return false;
    }
    cublasSetStream(blas_, stream_);
    // Exact float32 products (no TF32): results comparable with the CPU's.
    cublasSetMathMode(blas_, CUBLAS_PEDANTIC_MATH);
    return true;
  }

  std::string name() const override { return "cuda" + std::to_string(index_) + " (" + model_ + ")"; }
  bool gpu() const override { return true; }

  void* alloc(size_t bytes) override {
    void* p = nullptr;
    cudaSetDevice(index_);
    if (cudaMalloc(&p, std::max<size_t>(bytes, 4)) != cudaSuccess)
      throw std::bad_alloc();
    return p;
  }
  void release(void* p) override { cudaFree(p); }
  void upload(void* dst, const void* src, size_t bytes) override {
    if (bytes)
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_);
  }
  void download(void* dst, const void* src, size_t bytes) override {
    if (bytes)
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_);
    cudaStreamSynchronize(stream_);
  }

  void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, const float* b,
            float beta, float* c) override {
    if (m == 0 || n == 0)
      return;
    // Row-major c = op(a)·op(b) is column-major cᵀ = op(b)ᵀ·op(a)ᵀ: cuBLAS computes it with
    // the operands swapped and the leading dimensions of the row-major layouts.
    cublasSgemm(blas_, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
                &alpha, b, tb ? k : n, a, ta ? m : k, &beta, c, n);
  }

  void bias_add(float* y, const float* bias, int rows, int cols) override {
    size_t n = static_cast<size_t>(rows) * cols;
    if (n)
      k_bias_add<<<blocks_for(n), threads_per_block, 0, stream_>>>(y, bias, rows, cols);
  }
  void bias_grad(const float* dy, float* db, int rows, int cols) override {
    if (cols)
      k_bias_grad<<<blocks_for(cols), threads_per_block, 0, stream_>>>(dy, db, rows, cols);
  }
  void relu(float* y, size_t n) override {
    if (n)
      k_relu<<<blocks_for(n), threads_per_block, 0, stream_>>>(y, n);
  }
  void relu_grad(const float* y, float* dy, size_t n) override {
    if (n)
      k_relu_grad<<<blocks_for(n), threads_per_block, 0, stream_>>>(y, dy, n);
  }

  xent_result softmax_xent(const float* logits, const int32_t* labels, int rows, int cols,
                           float grad_scale, float* dlogits) override {
    xent_result out;
    if (rows == 0)
      return out;
    if (rows > rows_cap_) {
      if (loss_)
        cudaFree(loss_);
      if (correct_)
        cudaFree(correct_);
      if (cudaMalloc(&loss_, rows * sizeof(double)) != cudaSuccess
          || cudaMalloc(&correct_, rows * sizeof(int)) != cudaSuccess)
        throw std::bad_alloc();
      rows_cap_ = rows;
    }
    k_softmax_xent<<<blocks_for(rows), threads_per_block, 0, stream_>>>(
      logits, labels, rows, cols, grad_scale, dlogits, loss_, correct_);
    std::vector<double> loss(rows);
    std::vector<int> correct(rows);
    cudaMemcpyAsync(loss.data(), loss_, rows * sizeof(double), cudaMemcpyDeviceToHost, stream_);
    cudaMemcpyAsync(correct.data(), correct_, rows * sizeof(int), cudaMemcpyDeviceToHost, stream_);
    cudaStreamSynchronize(stream_);
    for (int r = 0; r < rows; ++r) { // in row order, as the CPU sums
      out.loss_sum += loss[r];
      out.correct += correct[r];
    }
    return out;
  }

  void sgd(float* w, float* v, const float* g, size_t n, float lr, float momentum,
           float weight_decay) override {
    if (n)
      k_sgd<<<blocks_for(n), threads_per_block, 0, stream_>>>(w, v, g, n, lr, momentum,
                                                              weight_decay);
  }
  void axpy(float a, const float* x, float* y, size_t n) override {
    if (n)
      k_axpy<<<blocks_for(n), threads_per_block, 0, stream_>>>(a, x, y, n);
  }
  void scale(float a, float* x, size_t n) override {
    if (n)
      k_scale<<<blocks_for(n), threads_per_block, 0, stream_>>>(a, x, n);
  }
  void copy(const float* x, float* y, size_t n) override {
    if (n && x != y)
      cudaMemcpyAsync(y, x, n * sizeof(float), cudaMemcpyDeviceToDevice, stream_);
  }
  void fill(float* x, float v, size_t n) override {
    if (n)
      k_fill<<<blocks_for(n), threads_per_block, 0, stream_>>>(x, v, n);
  }
  void synchronize() override { cudaStreamSynchronize(stream_); }

private:
  int index_;
  std::string model_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  double* loss_ = nullptr;
  int* correct_ = nullptr;
  int rows_cap_ = 0;
};

} // namespace

std::unique_ptr<compute> make_cuda_compute(int index, std::string* why) {
  std::string scratch;
  if (!why)
    why = &scratch;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    *why = "no CUDA GPU here (" + std::string(cudaGetErrorString(cudaGetLastError())) + ")";
    return nullptr;
  }
  if (index < 0 || index >= count) {
    *why = "no CUDA device " + std::to_string(index) + " (this machine has "
           + std::to_string(count) + ")";
    return nullptr;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, index);
  auto c = std::make_unique<cuda_compute>(index, prop.name);
  if (!c->init(why))
    return nullptr;
  return c;
}

} // namespace monkey::devices
