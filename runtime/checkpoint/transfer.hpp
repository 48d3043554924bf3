// SPDX-License-Identifier: Apache-2.0
#pragma once
// Moving checkpoint pieces between nodes over a plain TCP socket, not through CAF messages
// (CAF's serializer moves ~100 MB/s; a socket moves GB/s). The node that has a piece grants
// a one-time ticket for it and hands the ticket to the node that wants it through CAF (an
// authenticated session); that node connects to the blob server and presents the ticket.
//
// Wire form (docs/checkpoints.md): the client sends one line `MKCK1 <ticket>\n`; the server
// answers `OK\n` and then the piece's files back to back in manifest order (their sizes are
// in the manifest both sides have), or `ERR <reason>\n`. The client checks every file's
// size and SHA-256 before the piece counts. Plain C++: no CAF (transfer.test.cpp).

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/checkpoint/store.hpp"
#include "runtime/expected.hpp"

namespace monkey::ckpt {

class blob_server {
public:
  explicit blob_server(store& s);
  ~blob_server();
  blob_server(const blob_server&) = delete;
  blob_server& operator=(const blob_server&) = delete;

  /// Listens on `host` (an ephemeral port); the endpoint others dial ("host:port").
  expected<std::string> start(const std::string& host);
  const std::string& endpoint() const { return endpoint_; }
  /// A ticket to read piece `m` of the store until `ttl` from now (reusable meanwhile).
  std::string grant(const manifest& m, std::chrono::seconds ttl = std::chrono::minutes(10));
  /// Stops accepting and waits for the transfers under way.
  void stop();
  /// Pieces served so far (for tests and logs).
  uint64_t served() const { return served_; }

private:
  void accept_loop();
  void serve(int fd);
  store& store_;
  int listen_fd_ = -1;
  std::string endpoint_;
  std::thread acceptor_;
  std::mutex mtx_;
  struct ticket {
    manifest piece;
    std::chrono::steady_clock::time_point until;
  };
  std::map<std::string, ticket> tickets_;
  std::atomic<int> active_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> served_{0};
};

/// Fetches piece `m` from the blob server at `endpoint` with `ticket` into `s` (a store on
/// this node): every file's size and SHA-256 are checked, and the piece counts only when
/// all are right. `io_timeout`: the longest wait for any one read or write.
expected<manifest> pull(store& s, const std::string& endpoint, const std::string& ticket,
                        const manifest& m,
                        std::chrono::milliseconds io_timeout = std::chrono::seconds(30));

/// Copies the files of piece `m` (in `s`) into `dest` (made if missing), each checked
/// against its SHA-256 as it is copied.
status copy_out(const store& s, const manifest& m, const std::string& dest);

} // namespace monkey::ckpt
