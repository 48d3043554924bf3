// SPDX-License-Identifier: Apache-2.0
#pragma once
// A tensor buffer of the data plane (docs/dataplane.md): an element type, a count and
// 64-byte aligned memory shared by its copies (copying a buffer copies the handle, not the
// bytes). A slice views part of the same memory. Header-only: apps and the runtime share it.
//
// While a data plane operation runs on a buffer (until its completion arrives), the app must
// not touch the bytes: the transport reads or writes them from its own threads.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <sys/mman.h>

namespace monkey::dp {

/// Element types, first float32 (gradients and parameters).
enum class dtype : uint8_t { f32 = 1, f64 = 2, i32 = 3, i64 = 4, u8 = 5, bf16 = 6, f16 = 7 };

/// Bytes per element; 0 for a value that is no dtype.
inline size_t dtype_size(dtype t) {
  switch (t) {
    case dtype::f32: return 4;
    case dtype::f64: return 8;
    case dtype::i32: return 4;
    case dtype::i64: return 8;
    case dtype::u8: return 1;
    case dtype::bf16: return 2;
    case dtype::f16: return 2;
  }
  return 0;
}

inline const char* to_string(dtype t) {
  switch (t) {
    case dtype::f32: return "float32";
    case dtype::f64: return "float64";
    case dtype::i32: return "int32";
    case dtype::i64: return "int64";
    case dtype::u8: return "uint8";
    case dtype::bf16: return "bfloat16";
    case dtype::f16: return "float16";
  }
  return "unknown";
}

class buffer {
public:
  buffer() = default;
  /// `count` zeroed elements of `type` (allocate once and reuse: fresh memory is slow). From
  /// 2 MB on, the memory is aligned to 2 MB and asks for transparent huge pages (where the
  /// kernel's setting is `madvise` or `always`): faster to fault in, to copy, and for a peer
  /// process to read (the data plane's sends by address pin its pages).
  buffer(dtype type, uint64_t count) : type_(type), count_(count) {
    auto bytes = count * dtype_size(type);
    constexpr size_t huge = size_t{2} << 20;
    auto rounded = (bytes + 63) / 64 * 64;
    void* p = nullptr;
    if (rounded != 0 && ::posix_memalign(&p, bytes >= huge ? huge : 64, rounded) != 0)
      throw std::bad_alloc();
    if (bytes >= huge)
      ::madvise(p, rounded, MADV_HUGEPAGE);
    if (p)
      std::memset(p, 0, rounded);
    mem_ = std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [](uint8_t* q) { std::free(q); });
  }
  /// `count` elements of `type` in memory owned elsewhere (the data plane's shared arena:
  /// communicator::alloc); `mem`'s deleter gives it back.
  buffer(dtype type, uint64_t count, std::shared_ptr<uint8_t> mem)
    : type_(type), count_(count), mem_(std::move(mem)) {}
  static buffer f32(uint64_t count) { return buffer(dtype::f32, count); }

  dtype type() const { return type_; }
  uint64_t count() const { return count_; }
  uint64_t bytes() const { return count_ * dtype_size(type_); }
  bool empty() const { return count_ == 0; }

  void* data() { return mem_ ? mem_.get() + offset_ : nullptr; }
  const void* data() const { return mem_ ? mem_.get() + offset_ : nullptr; }
  /// The elements as float (the buffer must be float32).
  float* f32() { return type_ == dtype::f32 ? static_cast<float*>(data()) : nullptr; }
  const float* f32() const {
    return type_ == dtype::f32 ? static_cast<const float*>(data()) : nullptr;
  }
  float& operator[](uint64_t i) { return f32()[i]; }
  float operator[](uint64_t i) const { return f32()[i]; }

  /// Elements [first, first + n) of the same memory.
  buffer slice(uint64_t first, uint64_t n) const {
    buffer b = *this;
    b.offset_ = offset_ + first * dtype_size(type_);
    b.count_ = n;
    return b;
  }
  /// Whether two buffers share memory (the same allocation).
  bool same_memory(const buffer& other) const { return mem_ == other.mem_; }

private:
  dtype type_ = dtype::f32;
  uint64_t count_ = 0;
  uint64_t offset_ = 0; ///< bytes into mem_
  std::shared_ptr<uint8_t> mem_;
};

} // namespace monkey::dp
