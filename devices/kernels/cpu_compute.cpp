// SPDX-License-Identifier: Apache-2.0
// The CPU's training kernels (devices/compute.hpp): OpenBLAS for GEMM, plain loops for the
// rest (contiguous and branch-light, so that the compiler vectorizes them). Every result is
// a function of the inputs and the BLAS thread count: deterministic on one CPU model.
#include "devices/compute.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#include <cblas.h>

namespace monkey::devices {

namespace {

// The element-wise loops, compiled for AVX-512, AVX2 and plain x86-64 and chosen at load by
// the CPU (GCC's function multiversioning): the build stays portable, the machine's vector
// width is used.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MONKEY_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MONKEY_VECTOR_CLONES
#endif

MONKEY_VECTOR_CLONES
void relu_loop(float* __restrict y, size_t n) {
  for (size_t k = 0; k < n; ++k)
    y[k] = y[k] > 0.0f ? y[k] : 0.0f;
}

MONKEY_VECTOR_CLONES
void relu_grad_loop(const float* __restrict y, float* __restrict dy, size_t n) {
  for (size_t k = 0; k < n; ++k)
    dy[k] = y[k] > 0.0f ? dy[k] : 0.0f;
}

MONKEY_VECTOR_CLONES
void add_row(float* __restrict row, const float* __restrict b, int cols) {
  for (int c = 0; c < cols; ++c)
    row[c] += b[c];
}

MONKEY_VECTOR_CLONES
void sgd_loop(float* __restrict w, float* __restrict v, const float* __restrict g, size_t n,
              float lr, float momentum, float weight_decay) {
  for (size_t k = 0; k < n; ++k) {
    float step = momentum * v[k] + (g[k] + weight_decay * w[k]);
    v[k] = step;
    w[k] = w[k] - lr * step;
  }
}

MONKEY_VECTOR_CLONES
void axpy_loop(float a, const float* __restrict x, float* __restrict y, size_t n) {
  for (size_t k = 0; k < n; ++k)
    y[k] = a * x[k] + y[k];
}

class cpu_compute final : public compute {
public:
  explicit cpu_compute(int threads) : threads_(std::max(1, threads)) {
    openblas_set_num_threads(threads_);
  }

  std::string name() const override {
    return "cpu (" + std::to_string(threads_) + (threads_ == 1 ? " thread)" : " threads)");
  }
  bool gpu() const override { return false; }

  void* alloc(size_t bytes) override {
    // 64-byte aligned (cache lines, AVX-512), rounded up as aligned_alloc wants.
    void* p = std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64));
    if (!p)
      throw std::bad_alloc();
    return p;
  }
  void release(void* p) override { std::free(p); }
  void upload(void* dst, const void* src, size_t bytes) override {
    if (bytes)
      std::memcpy(dst, src, bytes);
  }
  void download(void* dst, const void* src, size_t bytes) override {
    if (bytes)
      std::memcpy(dst, src, bytes);
  }

  void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, const float* b,
            float beta, float* c) override {
    if (m == 0 || n == 0)
      return;
    if (k == 0) { // BLAS leaves c alone only for beta = 1
      scale(beta, c, static_cast<size_t>(m) * static_cast<size_t>(n));
      return;
    }
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                m, n, k, alpha, a, ta ? m : k, b, tb ? k : n, beta, c, n);
  }

  void bias_add(float* y, const float* bias, int rows, int cols) override {
    for (int r = 0; r < rows; ++r)
      add_row(y + static_cast<size_t>(r) * static_cast<size_t>(cols), bias, cols);
  }

  void bias_grad(const float* dy, float* db, int rows, int cols) override {
    std::fill(db, db + cols, 0.0f);
    for (int r = 0; r < rows; ++r) // row by row: the same order as the CUDA kernel
      add_row(db, dy + static_cast<size_t>(r) * static_cast<size_t>(cols), cols);
  }

  void relu(float* y, size_t n) override { relu_loop(y, n); }

  void relu_grad(const float* y, float* dy, size_t n) override { relu_grad_loop(y, dy, n); }

  xent_result softmax_xent(const float* logits, const int32_t* labels, int rows, int cols,
                           float grad_scale, float* dlogits) override {
    xent_result out;
    for (int r = 0; r < rows; ++r) {
      const float* z = logits + static_cast<size_t>(r) * static_cast<size_t>(cols);
      int best = 0;
      float top = z[0];
      for (int c = 1; c < cols; ++c)
        if (z[c] > top) {
          top = z[c];
          best = c;
        }
      double sum = 0;
      for (int c = 0; c < cols; ++c)
        sum += std::exp(static_cast<double>(z[c] - top));
      auto label = labels[r];
      out.loss_sum += std::log(sum) - static_cast<double>(z[label] - top);
      out.correct += best == label;
      if (dlogits) {
        float* d = dlogits + static_cast<size_t>(r) * static_cast<size_t>(cols);
        for (int c = 0; c < cols; ++c) {
          auto p = static_cast<float>(std::exp(static_cast<double>(z[c] - top)) / sum);
          d[c] = (p - (c == label ? 1.0f : 0.0f)) * grad_scale;
        }
      }
    }
    return out;
  }

  void sgd(float* w, float* v, const float* g, size_t n, float lr, float momentum,
           float weight_decay) override {
    sgd_loop(w, v, g, n, lr, momentum, weight_decay);
  }

  void axpy(float a, const float* x, float* y, size_t n) override { axpy_loop(a, x, y, n); }
  void scale(float a, float* x, size_t n) override {
    for (size_t k = 0; k < n; ++k)
      x[k] = a * x[k];
  }
  void copy(const float* x, float* y, size_t n) override {
    if (n && x != y)
      std::memmove(y, x, n * sizeof(float));
  }
  void fill(float* x, float v, size_t n) override { std::fill(x, x + n, v); }
  void synchronize() override {}

private:
  int threads_;
};

} // namespace

std::unique_ptr<compute> make_cpu_compute(int threads) {
  return std::make_unique<cpu_compute>(threads);
}

#ifndef MONKEY_HAVE_CUDA
std::unique_ptr<compute> make_cuda_compute(int, std::string* why) {
  if (why)
    *why = "this build has no CUDA support (nvcc was not found when it was built)";
  return nullptr;
}
#endif

} // namespace monkey::devices
