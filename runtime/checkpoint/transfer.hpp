// SPDX-License-Identifier: Apache-2.0
#pragma once
// Moving checkpoint pieces between nodes over the data plane (docs/dataplane.md), not
// through CAF messages (CAF's serializer moves ~100 MB/s; a socket moves GB/s). The node
// that has a piece grants a ticket for it and hands the ticket to the node that wants it
// through CAF (an authenticated session); that node dials the blob server.
//
// Wire form (docs/checkpoints.md): a ticket is "<id>.<secret>" (8 and 32 hex digits). The
// client dials a data plane TCP link asking for rank <id> and proves the secret as its key
// (the secret never crosses the wire; an unknown or expired id is refused with the reason).
// On a `--tls` cluster the link is then wrapped in TLS with the nodes' certificates. The
// server sends the piece's files in manifest order as frames of bytes (dtype u8, tag = the
// file's index, up to 4 MB each), then an empty frame tagged `end_tag`; a failure on the
// way is a frame tagged `error_tag` carrying the reason. The client checks every file's
// size and SHA-256 before the piece counts. Plain C++: no CAF (store.test.cpp).

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/checkpoint/store.hpp"
#include "runtime/dataplane/tcp_link.hpp"
#include "runtime/expected.hpp"

namespace monkey::dp {
struct tls_context;
}

namespace monkey::ckpt {

constexpr uint32_t end_tag = 0xfffffffeu;
constexpr uint32_t error_tag = 0xffffffffu;

/// TLS for the transfers of a `--tls` cluster (null: plain keyed TCP).
using tls_ptr = std::shared_ptr<dp::tls_context>;

class blob_server {
public:
  /// `tls`: the node's TLS context on a `--tls` cluster (every transfer wrapped), else null.
  explicit blob_server(store& s, tls_ptr tls = nullptr);
  ~blob_server();
  blob_server(const blob_server&) = delete;
  blob_server& operator=(const blob_server&) = delete;

  /// Listens on `host` (an ephemeral port); the endpoint others dial ("host:port").
  expected<std::string> start(const std::string& host);
  const std::string& endpoint() const { return endpoint_; }
  /// A ticket ("<id>.<secret>") to read piece `m` of the store until `ttl` from now
  /// (reusable meanwhile).
  std::string grant(const manifest& m, std::chrono::seconds ttl = std::chrono::minutes(10));
  /// Stops accepting and waits for the transfers under way.
  void stop();
  /// Pieces served so far (for tests and logs).
  uint64_t served() const { return served_; }

private:
  void accept_loop();
  void serve(int fd);
  expected<std::string> secret_of(uint32_t id, manifest& piece);
  store& store_;
  tls_ptr tls_;
  dp::tcp_listener listener_;
  std::string endpoint_;
  std::thread acceptor_;
  std::mutex mtx_;
  struct ticket {
    std::string secret;
    manifest piece;
    std::chrono::steady_clock::time_point until;
  };
  std::map<uint32_t, ticket> tickets_;
  uint32_t next_id_ = 0;
  std::atomic<int> active_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> served_{0};
};

/// Fetches piece `m` from the blob server at `endpoint` with `ticket` into `s` (a store on
/// this node): every file's size and SHA-256 are checked, and the piece counts only when
/// all are right. `tls`: this node's TLS context on a `--tls` cluster (else null).
/// `io_timeout`: the longest wait for any one read or write.
expected<manifest> pull(store& s, const std::string& endpoint, const std::string& ticket,
                        const manifest& m, const tls_ptr& tls = nullptr,
                        std::chrono::milliseconds io_timeout = std::chrono::seconds(30));

/// Copies the files of piece `m` (in `s`) into `dest` (made if missing), each checked
/// against its SHA-256 as it is copied.
status copy_out(const store& s, const manifest& m, const std::string& dest);

} // namespace monkey::ckpt
