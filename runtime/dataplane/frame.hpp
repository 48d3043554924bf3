// SPDX-License-Identifier: Apache-2.0
#pragma once
// The data plane's frame (issue #11, step 1; docs/dataplane.md): what travels between two
// ranks' transports ahead of each tensor. A fixed 40-byte little-endian header, then the
// payload (count elements of the element type, bytes = count * element size):
//
//   offset  size  field
//   0       4     magic "MKDP"
//   4       2     version (1)
//   6       1     element type (dtype)
//   7       1     flags (0: none defined yet)
//   8       4     source rank
//   12      4     tag (the app's: matches a send to its recv)
//   16      8     element count
//   24      8     payload bytes
//   32      4     reserved (0)
//   36      4     CRC-32C of bytes 0..35
//
// The header is checked before any payload is read (its CRC, the magic, the version, the
// element type, that bytes = count * element size and that it fits the receiver's limit), so
// a corrupt, truncated or hostile frame is refused with an error that says what is wrong,
// never read into memory. The payload is not checksummed (TCP's and the kernel's checks;
// shared memory is local). Plain C++: no CAF (frame.test.cpp).

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "monkey/sdk/tensor.hpp"
#include "runtime/expected.hpp"

namespace monkey::dp {


constexpr size_t header_size = 40;
constexpr uint16_t frame_version = 1;

struct frame_header {
  dtype type = dtype::f32;
  uint8_t flags = 0;
  uint32_t src_rank = 0;
  uint32_t tag = 0;
  uint64_t count = 0;
  uint64_t bytes = 0; ///< count * dtype_size(type)
};

/// A header for `count` elements of `type` (bytes computed).
frame_header make_header(dtype type, uint32_t src_rank, uint32_t tag, uint64_t count);

/// The header's 40 bytes.
std::array<uint8_t, header_size> encode(const frame_header& h);

/// The header in `in` (40 bytes), or what is wrong with it: a bad CRC, another magic or
/// version, an unknown element type, bytes that are not count * element size, or a
/// payload over `max_bytes`.
expected<frame_header> decode(const uint8_t* in, uint64_t max_bytes);

/// CRC-32C (Castagnoli) of `n` bytes.
uint32_t crc32c(const uint8_t* p, size_t n);

} // namespace monkey::dp
