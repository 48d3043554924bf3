// SPDX-License-Identifier: Apache-2.0
#include "runtime/dataplane/frame.hpp"

#include <limits>

namespace monkey::dp {

namespace {

constexpr uint8_t magic[4] = {'M', 'K', 'D', 'P'};

void put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}

void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    p[i] = static_cast<uint8_t>(v >> (8 * i));
}

void put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    p[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint16_t get16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

uint32_t get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

uint64_t get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

struct crc_table {
  uint32_t t[256];
  crc_table() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = (c & 1) ? 0x82F63B78u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
  }
};

} // namespace

uint32_t crc32c(const uint8_t* p, size_t n) {
  static const crc_table table;
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i)
    c = table.t[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

frame_header make_header(dtype type, uint32_t src_rank, uint32_t tag, uint64_t count) {
  frame_header h;
  h.type = type;
  h.src_rank = src_rank;
  h.tag = tag;
  h.count = count;
  h.bytes = count * dtype_size(type);
  return h;
}

frame_header make_ref_header(dtype type, uint32_t src_rank, uint32_t tag, uint64_t count,
                             uint8_t flag) {
  auto h = make_header(type, src_rank, tag, count);
  h.flags = flag;
  h.bytes = ref_payload_bytes;
  return h;
}

frame_header make_ack_header(uint32_t src_rank, uint32_t tag) {
  auto h = make_header(dtype::u8, src_rank, tag, 8);
  h.flags = frame_ref_ack;
  return h;
}

std::array<uint8_t, header_size> encode(const frame_header& h) {
  std::array<uint8_t, header_size> out{};
  for (int i = 0; i < 4; ++i)
    out[static_cast<size_t>(i)] = magic[i];
  put16(&out[4], frame_version);
  out[6] = static_cast<uint8_t>(h.type);
  out[7] = h.flags;
  put32(&out[8], h.src_rank);
  put32(&out[12], h.tag);
  put64(&out[16], h.count);
  put64(&out[24], h.bytes);
  put32(&out[32], 0);
  put32(&out[36], crc32c(out.data(), 36));
  return out;
}

expected<frame_header> decode(const uint8_t* in, uint64_t max_bytes) {
  if (get32(&in[36]) != crc32c(in, 36))
    return failure{"data plane: a frame header failed its CRC (corrupt, or not a Monkey data "
                   "plane peer)"};
  for (int i = 0; i < 4; ++i)
    if (in[i] != magic[i])
      return failure{"data plane: not a frame (bad magic)"};
  if (auto v = get16(&in[4]); v != frame_version)
    return failure{"data plane: frame version " + std::to_string(v) + ", this side speaks "
                   + std::to_string(frame_version)};
  frame_header h;
  h.type = static_cast<dtype>(in[6]);
  auto size = dtype_size(h.type);
  if (size == 0)
    return failure{"data plane: unknown element type " + std::to_string(in[6])};
  h.flags = in[7];
  if (h.flags != 0 && h.flags != frame_by_ref && h.flags != frame_ref_ack
      && h.flags != frame_by_addr)
    return failure{"data plane: unknown frame flags " + std::to_string(h.flags)};
  h.src_rank = get32(&in[8]);
  h.tag = get32(&in[12]);
  h.count = get64(&in[16]);
  h.bytes = get64(&in[24]);
  if (h.count > std::numeric_limits<uint64_t>::max() / size)
    return failure{"data plane: a frame of " + std::to_string(h.count) + " " + to_string(h.type)
                   + " elements: too many"};
  bool ref = h.flags == frame_by_ref || h.flags == frame_by_addr;
  auto payload = ref ? ref_payload_bytes : h.count * size;
  if (h.bytes != payload
      || (h.flags == frame_ref_ack && (h.type != dtype::u8 || h.count != 8)))
    return failure{std::string("data plane: a ")
                   + (h.flags == frame_by_ref    ? "by-reference frame"
                      : h.flags == frame_by_addr ? "by-address frame"
                      : h.flags == frame_ref_ack ? "reference acknowledgement"
                                                 : "frame")
                   + " of " + std::to_string(h.count) + " " + to_string(h.type)
                   + " elements says " + std::to_string(h.bytes) + " bytes"};
  if (h.data_bytes() > max_bytes)
    return failure{"data plane: a frame of " + std::to_string(h.data_bytes())
                   + " bytes exceeds the limit of " + std::to_string(max_bytes)};
  return h;
}

} // namespace monkey::dp
