// SPDX-License-Identifier: Apache-2.0
// Clears OpenSSL's per-thread error queue before every TLS I/O call that CAF 0.17's
// openssl module makes.
//
// Why: SSL_get_error() reports SSL_ERROR_SSL whenever the calling thread's error queue is
// not empty, and OpenSSL's documentation requires the queue to be empty before each
// SSL_read/SSL_write/SSL_accept/SSL_connect. CAF 0.17 never clears it, and all of a node's
// connections share one multiplexer thread: one connection that fails (a client that
// exits without close_notify, a peer with a certificate from another CA, garbage bytes)
// leaves an error behind, and the next healthy connection that merely has nothing to read
// (SSL_ERROR_WANT_READ) is taken for broken and closed. Nodes then drop and redial each
// other every few hundred milliseconds. These wrappers interpose the four calls (the
// executable's definitions win over libssl's for libcaf_openssl.so) and forward to libssl.
//
// Second trap (CAF issue #1060, fixed only in CAF 0.18): while a TLS handshake waits for the
// peer, CAF's openssl session calls SSL_accept/SSL_connect from its *write* path too and
// takes SSL_ERROR_WANT_READ for progress. BASP queues its handshake message at once, so the
// multiplexer thread spins at 100% CPU for as long as the peer stays silent: a half-open
// connection to a node, or a client dialing a frozen node (the CLI then burned a core
// forever). The wrappers below wait, when the handshake must wait for the peer, up to 10 ms
// for the socket to become readable before they return: the spin becomes a slow poll, and
// a handshake whose peer answers goes on at once.

#include <dlfcn.h>
#include <mutex>
#include <poll.h>
#include <string>
#include <utility>

#include <openssl/err.h>
#include <openssl/ssl.h>

namespace {

template <class F>
F real(const char* name) {
  return reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
}

/// After a handshake step that must wait for the peer: wait a little for its bytes.
int pace_handshake(SSL* ssl, int ret) {
  if (ret != 1 && SSL_get_error(ssl, ret) == SSL_ERROR_WANT_READ) {
    pollfd p{SSL_get_fd(ssl), POLLIN, 0};
    if (p.fd >= 0)
      ::poll(&p, 1, 10);
  }
  return ret;
}

std::mutex failure_mtx;
std::string failure; ///< why the last outgoing TLS handshake of this process failed

/// A handshake this process started failed for good: remember why (CAF 0.17 only says
/// "cannot connect"), for describe_connect_error.
void note_failure(SSL* ssl, int ret) {
  if (ret == 1 || SSL_get_error(ssl, ret) != SSL_ERROR_SSL)
    return;
  std::string why;
  auto verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK)
    why = X509_verify_cert_error_string(verify);
  else if (auto* r = ERR_reason_error_string(ERR_peek_error()))
    why = r;
  else
    why = "handshake failure";
  std::lock_guard<std::mutex> g{failure_mtx};
  failure = why;
}

} // namespace

extern "C" {

int SSL_read(SSL* ssl, void* buf, int num) {
  static auto f = real<int (*)(SSL*, void*, int)>("SSL_read");
  ERR_clear_error();
  return f(ssl, buf, num);
}

int SSL_write(SSL* ssl, const void* buf, int num) {
  static auto f = real<int (*)(SSL*, const void*, int)>("SSL_write");
  ERR_clear_error();
  return f(ssl, buf, num);
}

int SSL_accept(SSL* ssl) {
  static auto f = real<int (*)(SSL*)>("SSL_accept");
  ERR_clear_error();
  return pace_handshake(ssl, f(ssl));
}

int SSL_connect(SSL* ssl) {
  static auto f = real<int (*)(SSL*)>("SSL_connect");
  ERR_clear_error();
  auto ret = f(ssl);
  note_failure(ssl, ret);
  return pace_handshake(ssl, ret);
}

} // extern "C"

namespace monkey {

/// Why the last TLS handshake this process started failed ("" if none since the last call).
std::string take_tls_failure() {
  std::lock_guard<std::mutex> g{failure_mtx};
  return std::exchange(failure, std::string{});
}

/// Referenced by apply_network_config so that the linker keeps this object (and with it
/// the wrappers) in every binary.
int tls_hygiene_installed() {
  return 1;
}

} // namespace monkey
