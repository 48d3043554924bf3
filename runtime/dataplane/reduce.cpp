// SPDX-License-Identifier: Apache-2.0
#include "runtime/dataplane/reduce.hpp"

#include <cmath>
#include <cstring>

namespace monkey::dp {

namespace {

template <class T>
void add_wrapping(void* dv, const void* sv, uint64_t n) {
  // Unsigned arithmetic: a wrap on overflow, never undefined behaviour.
  using U = std::make_unsigned_t<T>;
  auto* __restrict d = static_cast<U*>(dv);
  auto* __restrict s = static_cast<const U*>(sv);
  for (uint64_t k = 0; k < n; ++k)
    d[k] = static_cast<U>(d[k] + s[k]);
}

template <float (*to)(uint16_t), uint16_t (*from)(float)>
void add_half(void* dv, const void* sv, uint64_t n) {
  auto* d = static_cast<uint16_t*>(dv);
  auto* s = static_cast<const uint16_t*>(sv);
  for (uint64_t k = 0; k < n; ++k)
    d[k] = from(to(d[k]) + to(s[k]));
}

template <class T>
void divide_plain(void* dv, uint64_t n, int ranks) {
  auto* d = static_cast<T*>(dv);
  auto by = static_cast<T>(ranks);
  for (uint64_t k = 0; k < n; ++k)
    d[k] = d[k] / by;
}

template <float (*to)(uint16_t), uint16_t (*from)(float)>
void divide_half(void* dv, uint64_t n, float by) {
  auto* d = static_cast<uint16_t*>(dv);
  for (uint64_t k = 0; k < n; ++k)
    d[k] = from(to(d[k]) / by);
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

/// d[k] += s[k], 32 bytes of lanes at a time (GCC's vector extension: SSE/AVX as the target
/// allows), then one by one.
template <class T>
void add_vectorized(T* __restrict d, const T* __restrict s, uint64_t n) {
  constexpr uint64_t lanes = 32 / sizeof(T);
  typedef T vec __attribute__((vector_size(32)));
  uint64_t k = 0;
  for (; k + lanes <= n; k += lanes) {
    vec a, b;
    std::memcpy(&a, d + k, sizeof(a));
    std::memcpy(&b, s + k, sizeof(b));
    a = a + b;
    std::memcpy(d + k, &a, sizeof(a));
  }
  for (; k < n; ++k)
    d[k] = d[k] + s[k];
}

} // namespace

void add_f32(float* __restrict d, const float* __restrict s, uint64_t n) {
  add_vectorized(d, s, n);
}

float bf16_to_f32(uint16_t h) {
  return float_of(static_cast<uint32_t>(h) << 16);
}

uint16_t f32_to_bf16(float f) {
  auto u = bits_of(f);
  if (std::isnan(f))
    return static_cast<uint16_t>((u >> 16) | 0x40); // a quiet NaN, sign kept
  u += 0x7fff + ((u >> 16) & 1); // to nearest even
  return static_cast<uint16_t>(u >> 16);
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0x1f) // infinity or NaN
    return float_of(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0)
      return float_of(sign);
    // Subnormal: mant * 2^-24.
    float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return float_of(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t f32_to_f16(float f) {
  auto u = bits_of(f);
  auto sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u) // infinity or NaN
    return static_cast<uint16_t>(sign | 0x7c00 | (abs > 0x7f800000u ? 0x200 : 0));
  if (abs >= 0x477ff000u) // rounds to 65520 or more: infinity
    return static_cast<uint16_t>(sign | 0x7c00);
  if (abs < 0x38800000u) { // below the smallest normal (2^-14): a subnormal or zero
    // The value in units of 2^-24, rounded to nearest even.
    float v = float_of(abs) * 16777216.0f;
    auto q = static_cast<uint32_t>(std::nearbyint(v)); // the default rounding: to even
    return static_cast<uint16_t>(sign | q);
  }
  // Normal: rebias the exponent, round the 13 dropped bits to nearest even.
  uint32_t r = abs - (112u << 23);
  r += 0xfff + ((r >> 13) & 1);
  return static_cast<uint16_t>(sign | (r >> 13));
}

status check_reducible(dtype t, reduce_op op, const char* what) {
  bool floating = t == dtype::f32 || t == dtype::f64 || t == dtype::bf16 || t == dtype::f16;
  bool integer = t == dtype::i32 || t == dtype::i64;
  if (!floating && !integer)
    return failure{std::string("data plane: ") + what + " reduces float32, float64, bfloat16, "
                   "float16, int32 and int64 (the buffer holds " + to_string(t) + ")"};
  if (op == reduce_op::mean && !floating)
    return failure{std::string("data plane: ") + what + ": the mean is defined for floating "
                   "types only (the buffer holds " + to_string(t)
                   + "): sum, then divide as the app sees fit"};
  return {};
}

void add_elems(dtype t, void* d, const void* s, uint64_t n) {
  switch (t) {
    case dtype::f32: return add_f32(static_cast<float*>(d), static_cast<const float*>(s), n);
    case dtype::f64: return add_vectorized(static_cast<double*>(d), static_cast<const double*>(s), n);
    case dtype::i32: return add_wrapping<int32_t>(d, s, n);
    case dtype::i64: return add_wrapping<int64_t>(d, s, n);
    case dtype::bf16: return add_half<bf16_to_f32, f32_to_bf16>(d, s, n);
    case dtype::f16: return add_half<f16_to_f32, f32_to_f16>(d, s, n);
    case dtype::u8: return; // refused by check_reducible before any byte moves
  }
}

void divide_elems(dtype t, void* d, uint64_t n, int ranks) {
  switch (t) {
    case dtype::f32: return divide_plain<float>(d, n, ranks);
    case dtype::f64: return divide_plain<double>(d, n, ranks);
    case dtype::bf16: return divide_half<bf16_to_f32, f32_to_bf16>(d, n, static_cast<float>(ranks));
    case dtype::f16: return divide_half<f16_to_f32, f32_to_f16>(d, n, static_cast<float>(ranks));
    default: return; // refused by check_reducible
  }
}

} // namespace monkey::dp
