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
//   7       1     flags (0, or one of frame_by_ref, frame_ref_ack, frame_by_addr)
//   8       4     source rank
//   12      4     tag (the app's: matches a send to its recv)
//   16      8     element count
//   24      8     payload bytes
//   32      4     reserved (0)
//   36      4     CRC-32C of bytes 0..35
//
// Two flags serve single-copy sends of registered tensors between processes of one machine
// (docs/dataplane.md, "Registered buffers"): a `frame_by_ref` frame's payload is a 16-byte
// reference (the tensor's offset in the sender's arena, then 0) while count and type describe
// the tensor, which the receiver copies straight from the sender's arena; its `frame_ref_ack`
// (8 uint8 elements: the reference's id, the second half of the reference) tells the sender
// that the copy is done, and its send completes. A `frame_by_addr` frame does the same for a
// tensor anywhere in the sender's memory (its payload: the tensor's address in the sender's
// process, then the id), which the receiver reads with one kernel copy (process_vm_readv,
// "CMA"; a rank of the same process: memcpy), where the two processes said at set-up that it
// can (transport.hpp, peer_memory); it is acknowledged the same way.
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

constexpr uint8_t frame_by_ref = 1;  ///< the payload refers to the tensor in the sender's arena
constexpr uint8_t frame_ref_ack = 2; ///< the by-reference frame's copy is done
constexpr uint8_t frame_by_addr = 3; ///< the payload is the tensor's address in the sender
constexpr uint64_t ref_payload_bytes = 16; ///< the offset (address), then the reference's id

struct frame_header {
  dtype type = dtype::f32;
  uint8_t flags = 0;
  uint32_t src_rank = 0;
  uint32_t tag = 0;
  uint64_t count = 0;
  uint64_t bytes = 0; ///< the payload's: count * dtype_size(type), or ref_payload_bytes
  /// The tensor's bytes (a by-reference frame's are not in its payload).
  uint64_t data_bytes() const { return count * dtype_size(type); }
};

/// A header for `count` elements of `type` (bytes computed).
frame_header make_header(dtype type, uint32_t src_rank, uint32_t tag, uint64_t count);
/// A by-reference frame's header (payload: the 16-byte reference; `flag`: frame_by_ref or
/// frame_by_addr) and its acknowledgement's (payload: the reference's 8-byte id).
frame_header make_ref_header(dtype type, uint32_t src_rank, uint32_t tag, uint64_t count,
                             uint8_t flag = frame_by_ref);
frame_header make_ack_header(uint32_t src_rank, uint32_t tag);

/// The header's 40 bytes.
std::array<uint8_t, header_size> encode(const frame_header& h);

/// The header in `in` (40 bytes), or what is wrong with it: a bad CRC, another magic or
/// version, an unknown element type or flag, bytes that are not count * element size (a
/// by-reference or by-address frame's: 16), an acknowledgement that is not 8 uint8 elements, or a tensor
/// over `max_bytes`.
expected<frame_header> decode(const uint8_t* in, uint64_t max_bytes);

/// CRC-32C (Castagnoli) of `n` bytes.
uint32_t crc32c(const uint8_t* p, size_t n);

} // namespace monkey::dp
