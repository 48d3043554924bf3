// SPDX-License-Identifier: Apache-2.0
#include "runtime/dataplane/tls_channel.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <optional>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

#include <openssl/err.h>
#include <openssl/ssl.h>

namespace monkey::dp {

struct tls_context {
  SSL_CTX* ctx = nullptr;
  ~tls_context() {
    if (ctx)
      SSL_CTX_free(ctx);
  }
};

namespace {

using std::chrono::milliseconds;

std::string ssl_errors() {
  std::string out;
  while (auto e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    out += (out.empty() ? "" : "; ") + std::string(buf);
  }
  return out.empty() ? std::string(std::strerror(errno)) : out;
}

/// How the peer went away, when the failure says it did: it closed the connection (a TLS
/// close, an end of stream without one, which is what a killed process leaves) or reset it.
std::optional<std::string> lost_peer(int err, int sys_errno) {
  if (err == SSL_ERROR_ZERO_RETURN)
    return std::string("closed the connection");
  if (err == SSL_ERROR_SYSCALL && (sys_errno == ECONNRESET || sys_errno == EPIPE))
    return std::string("reset the connection (") + std::strerror(sys_errno) + ")";
  if (err == SSL_ERROR_SYSCALL && sys_errno == 0)
    return std::string("closed the connection");
  if (err == SSL_ERROR_SSL
      && ERR_GET_REASON(ERR_peek_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING)
    return std::string("closed the connection without a TLS close");
  return std::nullopt;
}

class tls_channel final : public channel {
public:
  tls_channel(int fd, SSL* ssl, std::shared_ptr<tls_context> ctx, milliseconds timeout)
    : fd_(fd), ssl_(ssl), ctx_(std::move(ctx)), timeout_(timeout) {}
  ~tls_channel() override {
    SSL_free(ssl_);
    ::close(fd_);
  }

  expected<bool> wait_readable(milliseconds wait) override {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (SSL_pending(ssl_) > 0)
        return true;
    }
    pollfd p{fd_, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(wait.count()));
    if (r <= 0)
      return false;
    // Bytes came: application data, or only TLS records (a session ticket) with none.
    char c;
    std::lock_guard<std::mutex> guard{mtx_};
    ERR_clear_error();
    int n = SSL_peek(ssl_, &c, 1);
    if (n > 0)
      return true;
    int err = SSL_get_error(ssl_, n);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE)
      return false;
    return true; // the end or an error: recv_header reports it
  }

  expected<frame_header> recv_header(uint64_t max_bytes) override {
    uint8_t head[header_size];
    if (auto ok = read(head, sizeof(head), "a frame header"); !ok)
      return failure{ok.error()};
    return decode(head, max_bytes);
  }

  status recv_payload(void* dst, uint64_t bytes) override {
    return read(static_cast<uint8_t*>(dst), bytes, "a frame's payload");
  }

  status send(const frame_header& h, const void* payload) override {
    auto head = encode(h);
    if (h.bytes <= 16384) { // one record for a small frame
      std::vector<uint8_t> one(head.begin(), head.end());
      one.insert(one.end(), static_cast<const uint8_t*>(payload),
                 static_cast<const uint8_t*>(payload) + h.bytes);
      return write(one.data(), one.size());
    }
    if (auto ok = write(head.data(), head.size()); !ok)
      return ok;
    return write(static_cast<const uint8_t*>(payload), h.bytes);
  }

  void shutdown() override { ::shutdown(fd_, SHUT_RDWR); }
  const char* kind() const override { return "tls"; }

private:
  /// Waits for the socket to be ready for `events`; false after the timeout.
  bool wait_for(short events) {
    pollfd p{fd_, events, 0};
    for (;;) {
      int r = ::poll(&p, 1, static_cast<int>(timeout_.count()));
      if (r < 0 && errno == EINTR)
        continue;
      return r > 0;
    }
  }

  status read(uint8_t* dst, uint64_t n, const char* what) {
    while (n > 0) {
      int r, err, sys_errno = 0;
      {
        std::lock_guard<std::mutex> guard{mtx_};
        errno = 0;
        ERR_clear_error(); // SSL_get_error reads the thread's queue (../shared/caf-notes.md)
        r = SSL_read(ssl_, dst, static_cast<int>(std::min<uint64_t>(n, 1 << 30)));
        sys_errno = errno;
        err = SSL_get_error(ssl_, r);
      }
      if (r > 0) {
        dst += r;
        n -= static_cast<uint64_t>(r);
        continue;
      }
      if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
        if (!wait_for(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT))
          return failure{std::string("data plane: receiving ") + what + " over TLS: no progress for "
                         + std::to_string(timeout_.count()) + " ms: timed out"};
        continue;
      }
      if (auto gone = lost_peer(err, sys_errno))
        return failure{std::string("data plane: the peer ") + *gone + " with "
                       + std::to_string(n) + " bytes of " + what + " missing (TLS)"};
      return failure{std::string("data plane: receiving ") + what + " over TLS: " + ssl_errors()};
    }
    return {};
  }

  status write(const uint8_t* src, uint64_t n) {
    while (n > 0) {
      int r, err, sys_errno = 0;
      {
        std::lock_guard<std::mutex> guard{mtx_};
        errno = 0;
        ERR_clear_error();
        r = SSL_write(ssl_, src, static_cast<int>(std::min<uint64_t>(n, 1 << 20)));
        sys_errno = errno;
        err = SSL_get_error(ssl_, r);
      }
      if (r > 0) {
        src += r;
        n -= static_cast<uint64_t>(r);
        continue;
      }
      if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
        if (!wait_for(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT))
          return failure{"data plane: sending a frame over TLS: no progress for "
                         + std::to_string(timeout_.count()) + " ms: timed out"};
        continue;
      }
      if (auto gone = lost_peer(err, sys_errno))
        return failure{std::string("data plane: sending a frame over TLS: the peer ") + *gone};
      return failure{"data plane: sending a frame over TLS: " + ssl_errors()};
    }
    return {};
  }

  int fd_;
  SSL* ssl_;
  std::shared_ptr<tls_context> ctx_;
  milliseconds timeout_;
  std::mutex mtx_;
};

} // namespace

expected<std::shared_ptr<tls_context>> make_tls_context(const tls_files& files) {
  auto out = std::make_shared<tls_context>();
  out->ctx = SSL_CTX_new(TLS_method());
  if (!out->ctx)
    return failure{"data plane: TLS: " + ssl_errors()};
  SSL_CTX_set_min_proto_version(out->ctx, TLS1_2_VERSION);
  ERR_clear_error();
  if (SSL_CTX_use_certificate_chain_file(out->ctx, files.cert.c_str()) != 1)
    return failure{"data plane: TLS: cannot load the certificate " + files.cert + ": " + ssl_errors()};
  if (SSL_CTX_use_PrivateKey_file(out->ctx, files.key.c_str(), SSL_FILETYPE_PEM) != 1)
    return failure{"data plane: TLS: cannot load the key " + files.key + ": " + ssl_errors()};
  if (SSL_CTX_load_verify_locations(out->ctx, files.ca.c_str(), nullptr) != 1)
    return failure{"data plane: TLS: cannot load the CA " + files.ca + ": " + ssl_errors()};
  SSL_CTX_set_verify(out->ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  return out;
}

expected<std::unique_ptr<channel>> make_tls_channel(tcp_link link, std::shared_ptr<tls_context> ctx,
                                                    bool server, milliseconds timeout) {
  int fd = link.release();
  SSL* ssl = SSL_new(ctx->ctx);
  if (!ssl) {
    ::close(fd);
    return failure{"data plane: TLS: " + ssl_errors()};
  }
  SSL_set_fd(ssl, fd);
  // The handshake on the blocking socket (its timeouts bound it), then non-blocking.
  ERR_clear_error();
  int r = server ? SSL_accept(ssl) : SSL_connect(ssl);
  if (r != 1) {
    auto why = ssl_errors();
    SSL_free(ssl);
    ::close(fd);
    return failure{"data plane: the TLS handshake failed (is the peer's certificate signed by "
                   "the cluster's CA?): " + why};
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  return std::unique_ptr<channel>(std::make_unique<tls_channel>(fd, ssl, std::move(ctx), timeout));
}

} // namespace monkey::dp
