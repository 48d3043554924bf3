// SPDX-License-Identifier: Apache-2.0
#include "runtime/dataplane/frame.hpp"

#include <catch2/catch.hpp>

#include <cstring>
#include <future>
#include <numeric>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "runtime/dataplane/tcp_link.hpp"

using namespace monkey;
using namespace monkey::dp;

TEST_CASE("a frame header round-trips with every element type", "[runtime][dataplane]") {
  for (auto t : {dtype::f32, dtype::f64, dtype::i32, dtype::i64, dtype::u8, dtype::bf16,
                 dtype::f16}) {
    auto h = make_header(t, 3, 77, 1000);
    CHECK(h.bytes == 1000 * dtype_size(t));
    auto bytes = encode(h);
    auto back = decode(bytes.data(), 1 << 20);
    REQUIRE(back);
    CHECK(back->type == t);
    CHECK(back->src_rank == 3);
    CHECK(back->tag == 77);
    CHECK(back->count == 1000);
    CHECK(back->bytes == h.bytes);
  }
  auto empty = make_header(dtype::f32, 0, 0, 0);
  CHECK(decode(encode(empty).data(), 0));
}

TEST_CASE("corrupt and hostile frame headers are refused with what is wrong",
          "[runtime][dataplane]") {
  auto good = encode(make_header(dtype::f32, 1, 2, 16));
  SECTION("a flipped bit fails the CRC") {
    auto b = good;
    b[17] ^= 0x10;
    auto r = decode(b.data(), 1 << 20);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains("CRC"));
  }
  auto resealed = [](std::array<uint8_t, header_size> b) {
    auto crc = crc32c(b.data(), 36);
    for (int i = 0; i < 4; ++i)
      b[static_cast<size_t>(36 + i)] = static_cast<uint8_t>(crc >> (8 * i));
    return b;
  };
  SECTION("bytes that are not count * element size (a CRC that matches)") {
    auto b = good;
    b[24] = 63; // 63 bytes for 16 floats
    auto r = decode(resealed(b).data(), 1 << 20);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains("16 float32 elements says 63 bytes"));
  }
  SECTION("an unknown element type") {
    auto b = good;
    b[6] = 99;
    auto r = decode(resealed(b).data(), 1 << 20);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains("unknown element type 99"));
  }
  SECTION("another version, another magic") {
    auto b = good;
    b[4] = 2;
    CHECK_THAT(decode(resealed(b).data(), 1 << 20).error(), Catch::Contains("frame version 2"));
    b = good;
    b[0] = 'X';
    CHECK_THAT(decode(resealed(b).data(), 1 << 20).error(), Catch::Contains("bad magic"));
  }
  SECTION("a payload over the receiver's limit is refused before it is read") {
    auto r = decode(good.data(), 63);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains("64 bytes exceeds the limit of 63"));
  }
  SECTION("a count whose byte size overflows") {
    auto b = good;
    for (int i = 16; i < 24; ++i)
      b[static_cast<size_t>(i)] = 0xFF;
    auto r = decode(resealed(b).data(), UINT64_MAX);
    REQUIRE_FALSE(r);
  }
}

TEST_CASE("by-reference frames and their acknowledgements: what they may say",
          "[runtime][dataplane]") {
  auto resealed = [](std::array<uint8_t, header_size> b) {
    auto crc = crc32c(b.data(), 36);
    for (int i = 0; i < 4; ++i)
      b[static_cast<size_t>(36 + i)] = static_cast<uint8_t>(crc >> (8 * i));
    return b;
  };
  auto ref = make_ref_header(dtype::f32, 2, 9, 1000);
  CHECK(ref.bytes == ref_payload_bytes);
  CHECK(ref.data_bytes() == 4000);
  auto back = decode(encode(ref).data(), 4000);
  REQUIRE(back);
  CHECK(back->flags == frame_by_ref);
  CHECK(back->count == 1000);
  CHECK(back->bytes == 16);
  CHECK(back->data_bytes() == 4000);
  // The limit is on the tensor, not on the 16 bytes of its reference.
  auto over = decode(encode(ref).data(), 3999);
  REQUIRE_FALSE(over);
  CHECK_THAT(over.error(), Catch::Contains("4000 bytes exceeds the limit of 3999"));
  // By address (the tensor's address in the sender): the same 16 bytes, its own flag.
  auto addr = decode(encode(make_ref_header(dtype::bf16, 2, 9, 1000, frame_by_addr)).data(), 2000);
  REQUIRE(addr);
  CHECK(addr->flags == frame_by_addr);
  CHECK(addr->type == dtype::bf16);
  CHECK(addr->bytes == 16);
  CHECK(addr->data_bytes() == 2000);
  CHECK_FALSE(decode(encode(make_ref_header(dtype::bf16, 2, 9, 1000, frame_by_addr)).data(), 1999));
  auto ack = decode(encode(make_ack_header(1, 9)).data(), 0 + 8);
  REQUIRE(ack);
  CHECK(ack->flags == frame_ref_ack);
  CHECK(ack->bytes == 8);

  // A by-reference frame that claims its tensor's bytes as payload; an acknowledgement of
  // another size or type; an unknown flag.
  auto inline_ref = make_header(dtype::f32, 2, 9, 1000);
  inline_ref.flags = frame_by_ref;
  auto r = decode(encode(inline_ref).data(), 1 << 20);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error(), Catch::Contains("by-reference frame of 1000 float32 elements says 4000"));
  auto inline_addr = make_header(dtype::f32, 2, 9, 1000);
  inline_addr.flags = frame_by_addr;
  r = decode(encode(inline_addr).data(), 1 << 20);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error(), Catch::Contains("by-address frame of 1000 float32 elements says 4000"));
  auto long_ack = make_header(dtype::u8, 1, 9, 16);
  long_ack.flags = frame_ref_ack;
  r = decode(encode(long_ack).data(), 1 << 20);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error(), Catch::Contains("reference acknowledgement"));
  auto float_ack = make_header(dtype::f32, 1, 9, 2);
  float_ack.flags = frame_ref_ack;
  CHECK_FALSE(decode(encode(float_ack).data(), 1 << 20));
  auto b = encode(make_header(dtype::f32, 1, 2, 16));
  b[7] = 4;
  r = decode(resealed(b).data(), 1 << 20);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error(), Catch::Contains("unknown frame flags 4"));
}

TEST_CASE("CRC-32C matches the standard check value", "[runtime][dataplane]") {
  const char* s = "123456789";
  CHECK(crc32c(reinterpret_cast<const uint8_t*>(s), 9) == 0xE3069283u);
}

TEST_CASE("frames travel between two ranks over a TCP link that proved the key",
          "[runtime][dataplane]") {
  auto listener = tcp_listener::listen("127.0.0.1");
  REQUIRE(listener);
  const std::string key = "attempt-key-0123456789";
  auto accepted = std::async(std::launch::async, [&] {
    return listener->accept(key, std::chrono::seconds(5));
  });
  auto link = tcp_link::dial(listener->endpoint(), key, 5, 0, std::chrono::seconds(5));
  REQUIRE(link);
  auto server = accepted.get();
  REQUIRE(server);
  CHECK(server->peer_rank() == 5);
  // Sizes from 1 element to 8 MB, each with its own tag; the payload arrives intact.
  for (uint64_t n : {uint64_t{1}, uint64_t{3}, uint64_t{1000}, uint64_t{2} << 20}) {
    std::vector<float> out(n);
    std::iota(out.begin(), out.end(), 0.5f);
    auto h = make_header(dtype::f32, 5, static_cast<uint32_t>(n), n);
    auto sent = std::async(std::launch::async, [&] { return link->send(h, out.data()); });
    auto got = server->recv_header(64 << 20);
    REQUIRE(got);
    CHECK(got->tag == n);
    std::vector<float> in(got->count);
    REQUIRE(server->recv_payload(in.data(), got->bytes));
    REQUIRE(sent.get());
    CHECK(std::memcmp(in.data(), out.data(), n * 4) == 0);
  }
  // An empty frame (a zero-length tensor) is a header alone.
  REQUIRE(link->send(make_header(dtype::u8, 5, 8, 0), nullptr));
  auto empty = server->recv_header(1 << 20);
  REQUIRE(empty);
  CHECK(empty->bytes == 0);
  CHECK(empty->tag == 8);
  // The peer goes away: the next receive says so.
  link->close();
  auto late = server->recv_header(1 << 20);
  REQUIRE_FALSE(late);
  CHECK_THAT(late.error(), Catch::Contains("closed the connection"));
}

TEST_CASE("a connection without the attempt's key is refused on both sides",
          "[runtime][dataplane]") {
  auto listener = tcp_listener::listen("127.0.0.1");
  REQUIRE(listener);
  auto accepted = std::async(std::launch::async, [&] {
    return listener->accept("the-right-key", std::chrono::seconds(5));
  });
  auto link = tcp_link::dial(listener->endpoint(), "a-wrong-key", 1, 0, std::chrono::seconds(5));
  auto server = accepted.get();
  REQUIRE_FALSE(server);
  CHECK_THAT(server.error(), Catch::Contains("does not know this attempt's key"));
  REQUIRE_FALSE(link);
  CHECK_THAT(link.error(), Catch::Contains("refused the connection"));
}

TEST_CASE("a frame cut short or a silent peer is an error, never a hang",
          "[runtime][dataplane]") {
  auto listener = tcp_listener::listen("127.0.0.1");
  REQUIRE(listener);
  const std::string key = "k";
  auto accepted = std::async(std::launch::async, [&] {
    return listener->accept(key, std::chrono::milliseconds(800));
  });
  auto link = tcp_link::dial(listener->endpoint(), key, 2, 0, std::chrono::milliseconds(800));
  REQUIRE(link);
  auto server = accepted.get();
  REQUIRE(server);
  SECTION("silent: the receive times out") {
    auto r = server->recv_header(1 << 20);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains("timed out"));
  }
  SECTION("a payload cut short: the missing bytes are named") {
    std::vector<float> v(100, 1.0f);
    REQUIRE(link->send(make_header(dtype::f32, 2, 1, 100), v.data()));
    link->close();
    auto h = server->recv_header(1 << 20);
    REQUIRE(h);
    std::vector<float> in(1000);
    auto r = server->recv_payload(in.data(), 4000); // the peer sent 400 of 4000 bytes
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error(), Catch::Contains("3600 bytes of a frame's payload missing"));
  }
}
