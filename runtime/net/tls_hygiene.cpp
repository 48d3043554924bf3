// SPDX-License-Identifier: Apache-2.0
// Clears OpenSSL's per-thread error queue before every TLS I/O call that CAF 0.17's
// openssl module makes, paces its handshakes and cuts those that never end.
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
// forever). The wrappers below wait, when the handshake must wait for the peer, a little for
// the socket to become readable before they return: the spin becomes a slow poll, and a
// handshake whose peer answers goes on at once. The wait is 10 ms shared by every handshake
// that waits (each waits 10 ms / their number), so a multiplexer round costs about 10 ms
// however many there are, not 10 ms each.
//
// Third trap: CAF 0.17 never closes a TLS connection whose handshake does not end. When
// BASP gives such a connection up (its heartbeat's connection timeout, a client that
// abandons a connect) it stops reading and waits for its write buffer to drain before it
// closes; the buffer holds BASP's handshake, which cannot be sent before TLS's ends. So
// every dial of a frozen TLS node (a member probed every second, a CLI) left a socket
// behind that the multiplexer kept polling: the survivors of a frozen node slowed down
// by 10 ms more every second, until they suspected each other and no client's connection
// completed in time. A handshake still waiting for its peer after tls_handshake_limit is
// therefore cut (shutdown of the socket): its next step fails, and CAF closes it.

#include <algorithm>
#include <chrono>
#include <dlfcn.h>
#include <mutex>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <unordered_map>
#include <utility>

#include <openssl/err.h>
#include <openssl/ssl.h>

namespace {

template <class F>
F real(const char* name) {
  return reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
}

using steady = std::chrono::steady_clock;

/// How long a TLS handshake may wait for its peer before it is cut. CAF's BASP gives up on
/// a connection whose handshake has not arrived by its next heartbeat tick (250 ms), so a
/// TLS handshake this old has been abandoned by everyone but the socket.
constexpr std::chrono::seconds tls_handshake_limit{3};

/// The pace all waiting handshakes share per multiplexer round.
constexpr int pace_ms = 10;

/// Handshakes waiting for their peer: since when. Taken out when the handshake ends, fails
/// or is cut, and by SSL_free. Never destroyed: CAF's multiplexer thread may still make a
/// handshake step while the process's static objects are destroyed at exit.
struct waiting_table {
  std::mutex mtx;
  std::unordered_map<const SSL*, steady::time_point> since;
};

waiting_table& waiting() {
  static auto* table = new waiting_table;
  return *table;
}

void forget(const SSL* ssl) {
  auto& w = waiting();
  std::lock_guard<std::mutex> g{w.mtx};
  w.since.erase(ssl);
}

/// After a handshake step: if it must wait for the peer, wait a little for its bytes (or
/// cut it when it has waited past tls_handshake_limit).
int pace_handshake(SSL* ssl, int ret) {
  if (ret == 1 || SSL_get_error(ssl, ret) != SSL_ERROR_WANT_READ) {
    forget(ssl);
    return ret;
  }
  auto now = steady::now();
  int fd = SSL_get_fd(ssl);
  size_t others = 0;
  bool cut = false;
  {
    auto& w = waiting();
    std::lock_guard<std::mutex> g{w.mtx};
    auto since = w.since.try_emplace(ssl, now).first->second;
    others = w.since.size();
    if (now - since > tls_handshake_limit) {
      w.since.erase(ssl);
      cut = true;
    }
  }
  if (fd < 0)
    return ret;
  if (cut) {
    // Its next step reads end-of-file or fails to write: a failed connection, which CAF
    // closes and frees.
    ::shutdown(fd, SHUT_RDWR);
    return ret;
  }
  pollfd p{fd, POLLIN, 0};
  ::poll(&p, 1, std::max(1, pace_ms / static_cast<int>(std::max<size_t>(others, 1))));
  return ret;
}

/// Why the last outgoing TLS handshake of this process failed (never destroyed, as above).
struct last_failure {
  std::mutex mtx;
  std::string why;
};

last_failure& failure() {
  static auto* f = new last_failure;
  return *f;
}

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
  auto& f = failure();
  std::lock_guard<std::mutex> g{f.mtx};
  f.why = why;
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

void SSL_free(SSL* ssl) {
  static auto f = real<void (*)(SSL*)>("SSL_free");
  if (ssl)
    forget(ssl);
  f(ssl);
}

} // extern "C"

namespace monkey {

/// Why the last TLS handshake this process started failed ("" if none since the last call).
std::string take_tls_failure() {
  auto& f = failure();
  std::lock_guard<std::mutex> g{f.mtx};
  return std::exchange(f.why, std::string{});
}

/// Referenced by apply_network_config so that the linker keeps this object (and with it
/// the wrappers) in every binary.
int tls_hygiene_installed() {
  return 1;
}

} // namespace monkey
