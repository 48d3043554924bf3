// SPDX-License-Identifier: Apache-2.0
#pragma once
// The element-wise arithmetic of the data plane's reductions (docs/dataplane.md): which
// element types reduce, d += s for each of them, and the mean's division. Plain C++ (no CAF);
// comm.test.cpp checks every type against a scalar reference.
//
// Types: float32 and float64 (IEEE additions, in the ring's order: bit-exact against a
// reference that sums in the same order), int32 and int64 (two's complement, wrapping on
// overflow, as NCCL does), bfloat16 and float16 (each addition in float32, rounded back to
// the type to nearest even: what NCCL does for them). The mean is defined for the floating
// types only; uint8 does not reduce (it moves: broadcast, allgather, point-to-point).

#include <cstdint>
#include <string>

#include "monkey/sdk/tensor.hpp"
#include "runtime/expected.hpp"

namespace monkey::dp {

enum class reduce_op { sum, mean };

/// Whether `op` reduces buffers of `t`; the failure names the collective (`what`) and says
/// which types do.
status check_reducible(dtype t, reduce_op op, const char* what);

/// d[k] = d[k] + s[k] for `n` elements of `t` (a type that reduces).
void add_elems(dtype t, void* d, const void* s, uint64_t n);

/// d[k] = d[k] / ranks for `n` elements of `t` (a floating type).
void divide_elems(dtype t, void* d, uint64_t n, int ranks);

/// d[k] = d[k] + s[k] (float32), vectorized.
void add_f32(float* d, const float* s, uint64_t n);

/// bfloat16 and float16 from and to float32 (round to nearest even; NaN stays NaN).
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

} // namespace monkey::dp
