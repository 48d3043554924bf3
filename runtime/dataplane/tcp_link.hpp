// SPDX-License-Identifier: Apache-2.0
#pragma once
// A point-to-point data plane connection between two ranks over TCP (issue #11, step 1;
// docs/dataplane.md): frames (frame.hpp) with their payloads, header and payload in one
// vectored write, TCP_NODELAY, the kernel sizing the socket buffers.
//
// A connection proves the app job's per-attempt key before any frame flows: the listener
// sends a 32-byte nonce; the dialer answers with its rank and the rank it wants (4 bytes
// each, little-endian) and HMAC-SHA256(key, "monkey-dp-v1" + nonce + from + to); the
// listener answers one byte 1, or
// `ERR <reason>\n` and closes. A process without the key cannot inject bytes.
//
// Blocking calls with a deadline (SO_RCVTIMEO/SO_SNDTIMEO): meant for a transport thread,
// never an actor's. Plain C++: no CAF (tcp_link.test.cpp).

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "runtime/dataplane/frame.hpp"
#include "runtime/expected.hpp"

namespace monkey::dp {

class tcp_link {
public:
  tcp_link() = default;
  tcp_link(tcp_link&& other) noexcept;
  tcp_link& operator=(tcp_link&& other) noexcept;
  tcp_link(const tcp_link&) = delete;
  tcp_link& operator=(const tcp_link&) = delete;
  ~tcp_link();

  /// Connects to `endpoint` (host:port) and proves `key` as rank `rank` asking for rank
  /// `to` (a host listens for several ranks).
  static expected<tcp_link> dial(const std::string& endpoint, const std::string& key,
                                 uint32_t rank, uint32_t to, std::chrono::milliseconds timeout);

  /// Takes over `fd`, a connection just accepted, and checks its proof of the key that
  /// `key_for` names for the (from, to) it claims (or refuses it with that failure's text).
  /// `fd` is closed on failure. `timeout` bounds the proof and, later, every transfer;
  /// `what` names the key in a refusal.
  static expected<tcp_link> accept_on(int fd, const std::function<expected<std::string>(
                                                uint32_t from, uint32_t to)>& key_for,
                                      std::chrono::milliseconds timeout,
                                      const std::string& what = "this attempt's key");

  /// Sends one frame: the header and `payload` (h.bytes of it) in one vectored write.
  status send(const frame_header& h, const void* payload);
  /// The next frame's header (refused when corrupt or over `max_bytes`).
  expected<frame_header> recv_header(uint64_t max_bytes);
  /// The payload of the header just received, into `dst` (h.bytes).
  status recv_payload(void* dst, uint64_t bytes);

  /// The rank at the other end; on the accepting side to_rank() is the rank it asked for.
  uint32_t peer_rank() const { return peer_rank_; }
  uint32_t to_rank() const { return to_rank_; }
  int fd() const { return fd_; }
  /// Hands the socket over (the link no longer closes it).
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  bool open() const { return fd_ >= 0; }
  /// Wakes the calls blocked on the connection from other threads (they fail).
  void shutdown();
  /// How long a send or receive may make no progress from now on.
  void set_timeout(std::chrono::milliseconds t);
  void close();

private:
  friend class tcp_listener;
  tcp_link(int fd, uint32_t peer_rank) : fd_(fd), peer_rank_(peer_rank) {}
  int fd_ = -1;
  uint32_t peer_rank_ = 0;
  uint32_t to_rank_ = 0;
};

/// The key proof on a connected stream socket (TCP or Unix): the dialer's side, as rank
/// `from` asking for rank `to` (`peer` names the other end in errors)...
status prove_key(int fd, const std::string& key, uint32_t from, uint32_t to,
                 const std::string& peer);
/// ...and the listener's: the dialer's (from, to), or the refusal (also sent to it).
expected<std::pair<uint32_t, uint32_t>> check_key(int fd, const std::string& key);
/// The same where the key depends on what the dialer asks for (a checkpoint ticket's id):
/// `key_for(from, to)` names it, or the reason to refuse; `what` names the key in a refusal.
using key_lookup = std::function<expected<std::string>(uint32_t from, uint32_t to)>;
expected<std::pair<uint32_t, uint32_t>> check_key(int fd, const key_lookup& key_for,
                                                  const std::string& what);
/// Whether `fd` has bytes (or an end) to read within `wait`.
expected<bool> wait_readable(int fd, std::chrono::milliseconds wait);

class tcp_listener {
public:
  tcp_listener() = default;
  tcp_listener(tcp_listener&& other) noexcept;
  tcp_listener& operator=(tcp_listener&& other) noexcept;
  tcp_listener(const tcp_listener&) = delete;
  tcp_listener& operator=(const tcp_listener&) = delete;
  ~tcp_listener();

  /// Listens on `host` (an ephemeral port).
  static expected<tcp_listener> listen(const std::string& host);
  /// host:port the others dial.
  const std::string& endpoint() const { return endpoint_; }
  int fd() const { return fd_; }
  /// Accepts the next connection and checks its proof of `key` (a wrong one is refused
  /// with the reason, and is the error here too).
  expected<tcp_link> accept(const std::string& key, std::chrono::milliseconds timeout);

private:
  int fd_ = -1;
  std::string endpoint_;
};

} // namespace monkey::dp
