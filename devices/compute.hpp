// SPDX-License-Identifier: Apache-2.0
#pragma once
// One compute interface for what training needs (issue #12; docs/fmnist.md): GEMM, bias add
// and its gradient, ReLU and its gradient, softmax cross-entropy, SGD with momentum and
// weight decay, and the vector operations of reductions. Two implementations: the CPU
// (OpenBLAS plus plain loops the compiler vectorizes; the thread count is the worker's
// slots) and CUDA (cuBLAS plus small kernels; compiled where nvcc exists, run where a GPU
// is). Plain C++: no CAF. compute.test.cpp checks every kernel against a plain reference,
// and the CUDA kernels against the CPU ones.
//
// Matrices are float32, row-major and contiguous. Every pointer a kernel takes is the
// device's memory (alloc); upload and download move bytes between it and the host. Kernels
// on one compute run in the order they are called (CUDA: one stream); download waits.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace monkey::devices {

/// What softmax_xent measured: the sum over the rows of the cross-entropy, and how many
/// rows' largest logit is the label.
struct xent_result {
  double loss_sum = 0;
  int64_t correct = 0;
};

class compute {
public:
  virtual ~compute() = default;

  /// "cpu (2 threads)", "cuda0 (NVIDIA H200)".
  virtual std::string name() const = 0;
  virtual bool gpu() const = 0;

  /// Device memory of `bytes` (never null: throws std::bad_alloc when none is left).
  virtual void* alloc(size_t bytes) = 0;
  virtual void release(void* p) = 0;
  virtual void upload(void* dst, const void* src, size_t bytes) = 0;
  /// Waits for the kernels before it, then copies.
  virtual void download(void* dst, const void* src, size_t bytes) = 0;

  /// c[m×n] = alpha · op(a) · op(b) + beta · c, where op(a) is m×k (a is k×m when `ta`) and
  /// op(b) is k×n (b is n×k when `tb`).
  virtual void gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a,
                    const float* b, float beta, float* c) = 0;
  /// y[r][c] += bias[c] for a rows×cols y.
  virtual void bias_add(float* y, const float* bias, int rows, int cols) = 0;
  /// db[c] = Σ_r dy[r][c] (overwrites db).
  virtual void bias_grad(const float* dy, float* db, int rows, int cols) = 0;
  /// y = max(y, 0), in place.
  virtual void relu(float* y, size_t n) = 0;
  /// dy[k] = 0 where y[k] <= 0 (y: the ReLU's output).
  virtual void relu_grad(const float* y, float* dy, size_t n) = 0;
  /// Softmax of each row of logits (rows×cols) against labels[r] in [0, cols): the summed
  /// cross-entropy and the correct count (host values), and, when dlogits is not null,
  /// dlogits = (softmax − onehot(label)) · grad_scale.
  virtual xent_result softmax_xent(const float* logits, const int32_t* labels, int rows,
                                   int cols, float grad_scale, float* dlogits) = 0;
  /// SGD with momentum and weight decay (PyTorch's form): v = momentum · v + (g + wd · w);
  /// w = w − lr · v.
  virtual void sgd(float* w, float* v, const float* g, size_t n, float lr, float momentum,
                   float weight_decay) = 0;
  /// y = a · x + y; x = a · x; y = x; x = v.
  virtual void axpy(float a, const float* x, float* y, size_t n) = 0;
  virtual void scale(float a, float* x, size_t n) = 0;
  virtual void copy(const float* x, float* y, size_t n) = 0;
  virtual void fill(float* x, float v, size_t n) = 0;
  /// Waits until every kernel called so far has finished.
  virtual void synchronize() = 0;
};

/// The CPU with `threads` BLAS threads (OpenBLAS's count is per process: the last one made
/// sets it).
std::unique_ptr<compute> make_cpu_compute(int threads);

/// CUDA device `index`, or null with `why` (no GPU, a build without CUDA, a CUDA error).
std::unique_ptr<compute> make_cuda_compute(int index, std::string* why);

/// Device memory that releases itself.
template <class T>
class device_array {
public:
  device_array() = default;
  device_array(compute& c, size_t n) : c_(&c), n_(n) {
    p_ = n ? static_cast<T*>(c.alloc(n * sizeof(T))) : nullptr;
  }
  device_array(device_array&& o) noexcept : c_(o.c_), p_(o.p_), n_(o.n_) { o.p_ = nullptr; }
  device_array& operator=(device_array&& o) noexcept {
    if (this != &o) {
      reset();
      c_ = o.c_, p_ = o.p_, n_ = o.n_;
      o.p_ = nullptr;
    }
    return *this;
  }
  device_array(const device_array&) = delete;
  device_array& operator=(const device_array&) = delete;
  ~device_array() { reset(); }
  T* get() const { return p_; }
  size_t size() const { return n_; }
  void upload(const T* src, size_t n) { c_->upload(p_, src, n * sizeof(T)); }
  void download(T* dst, size_t n) const { c_->download(dst, p_, n * sizeof(T)); }

private:
  void reset() {
    if (p_)
      c_->release(p_);
    p_ = nullptr;
  }
  compute* c_ = nullptr;
  T* p_ = nullptr;
  size_t n_ = 0;
};

} // namespace monkey::devices
