// SPDX-License-Identifier: Apache-2.0
#include "runtime/dataplane/tcp_link.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "runtime/net/auth.hpp"

namespace monkey::dp {

namespace {

constexpr size_t nonce_size = 32;

std::string errno_text() {
  return std::strerror(errno);
}

void set_timeouts(int fd, std::chrono::milliseconds t) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/// Reads exactly `n` bytes; the failure says how many were missing and why.
status read_exact(int fd, void* dst, size_t n, const char* what) {
  auto* p = static_cast<char*>(dst);
  size_t got = 0;
  while (got < n) {
    auto r = ::recv(fd, p + got, n - got, 0);
    if (r < 0 && errno == EINTR)
      continue;
    if (r == 0)
      return failure{std::string("data plane: the peer closed the connection with ")
                     + std::to_string(n - got) + " bytes of " + what + " missing"};
    if (r < 0)
      return failure{std::string("data plane: receiving ") + what + ": "
                     + (errno == EAGAIN || errno == EWOULDBLOCK ? "timed out" : errno_text())};
    got += static_cast<size_t>(r);
  }
  return {};
}

status write_exact(int fd, const void* src, size_t n, const char* what) {
  auto* p = static_cast<const char*>(src);
  while (n > 0) {
    auto w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return failure{std::string("data plane: sending ") + what + ": "
                     + (errno == EAGAIN || errno == EWOULDBLOCK ? "timed out" : errno_text())};
    p += w;
    n -= static_cast<size_t>(w);
  }
  return {};
}

std::string proof_of(const std::string& key, const std::string& nonce, uint32_t from,
                     uint32_t to) {
  std::string msg = "monkey-dp-v1" + nonce;
  for (auto v : {from, to})
    for (int i = 0; i < 4; ++i)
      msg.push_back(static_cast<char>(v >> (8 * i)));
  return hmac_sha256(key, msg);
}

void tune(int fd, std::chrono::milliseconds timeout) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  set_timeouts(fd, timeout);
}

} // namespace

// ---- the key proof --------------------------------------------------------------------------

status prove_key(int fd, const std::string& key, uint32_t from, uint32_t to,
                 const std::string& peer) {
  std::string nonce(nonce_size, '\0');
  if (auto ok = read_exact(fd, nonce.data(), nonce.size(), "the challenge"); !ok)
    return failure{ok.error()};
  std::string answer(8, '\0');
  for (int i = 0; i < 4; ++i) {
    answer[static_cast<size_t>(i)] = static_cast<char>(from >> (8 * i));
    answer[static_cast<size_t>(4 + i)] = static_cast<char>(to >> (8 * i));
  }
  answer += proof_of(key, nonce, from, to);
  if (auto ok = write_exact(fd, answer.data(), answer.size(), "the proof"); !ok)
    return failure{ok.error()};
  char verdict = 0;
  if (auto ok = read_exact(fd, &verdict, 1, "the verdict"); !ok)
    return failure{ok.error()};
  if (verdict != 1) {
    std::string line(1, verdict);
    char c;
    while (line.size() < 256 && ::recv(fd, &c, 1, 0) == 1 && c != '\n')
      line.push_back(c);
    return failure{"data plane: " + peer + " refused the connection: "
                   + (line.rfind("ERR ", 0) == 0 ? line.substr(4) : line)};
  }
  return {};
}

expected<std::pair<uint32_t, uint32_t>> check_key(int fd, const std::string& key) {
  return check_key(
    fd, [&key](uint32_t, uint32_t) -> expected<std::string> { return key; },
    "this attempt's key");
}

expected<std::pair<uint32_t, uint32_t>> check_key(int fd, const key_lookup& key_for,
                                                  const std::string& what) {
  auto nonce = make_nonce();
  nonce.resize(nonce_size, '\0');
  if (auto ok = write_exact(fd, nonce.data(), nonce.size(), "the challenge"); !ok)
    return failure{ok.error()};
  std::string answer(8 + 32, '\0');
  if (auto ok = read_exact(fd, answer.data(), answer.size(), "the proof"); !ok)
    return failure{ok.error()};
  uint32_t from = 0, to = 0;
  for (int i = 3; i >= 0; --i) {
    from = (from << 8) | static_cast<uint8_t>(answer[static_cast<size_t>(i)]);
    to = (to << 8) | static_cast<uint8_t>(answer[static_cast<size_t>(4 + i)]);
  }
  auto refuse = [&](const std::string& why) -> expected<std::pair<uint32_t, uint32_t>> {
    auto line = "ERR " + why + "\n";
    write_exact(fd, line.data(), line.size(), "the refusal");
    return failure{"data plane: refused a connection claiming rank " + std::to_string(from)
                   + ": " + why};
  };
  auto key = key_for(from, to);
  if (!key)
    return refuse(key.error());
  if (!equal_digest(answer.substr(8), proof_of(*key, nonce, from, to)))
    return refuse("the peer does not know " + what);
  const char ok = 1;
  if (auto sent = write_exact(fd, &ok, 1, "the verdict"); !sent)
    return failure{sent.error()};
  return std::make_pair(from, to);
}

expected<bool> wait_readable(int fd, std::chrono::milliseconds wait) {
  if (fd < 0)
    return failure{"data plane: the connection is closed"};
  pollfd p{fd, POLLIN, 0};
  int r = ::poll(&p, 1, static_cast<int>(wait.count()));
  if (r < 0 && errno != EINTR)
    return failure{"data plane: poll: " + errno_text()};
  return r > 0;
}

// ---- tcp_link ------------------------------------------------------------------------------

tcp_link::tcp_link(tcp_link&& other) noexcept
  : fd_(other.fd_), peer_rank_(other.peer_rank_), to_rank_(other.to_rank_) {
  other.fd_ = -1;
}

tcp_link& tcp_link::operator=(tcp_link&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    peer_rank_ = other.peer_rank_;
    to_rank_ = other.to_rank_;
    other.fd_ = -1;
  }
  return *this;
}

tcp_link::~tcp_link() {
  close();
}

void tcp_link::set_timeout(std::chrono::milliseconds t) {
  if (fd_ >= 0)
    set_timeouts(fd_, t);
}

void tcp_link::shutdown() {
  if (fd_ >= 0)
    ::shutdown(fd_, SHUT_RDWR);
}

void tcp_link::close() {
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
}

expected<tcp_link> tcp_link::dial(const std::string& endpoint, const std::string& key,
                                  uint32_t rank, uint32_t to, std::chrono::milliseconds timeout) {
  auto colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return failure{"data plane: '" + endpoint + "' is not host:port"};
  auto host = endpoint.substr(0, colon);
  auto port = endpoint.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[')
    host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0)
    return failure{"data plane: cannot resolve " + endpoint + ": " + ::gai_strerror(rc)};
  int fd = -1;
  std::string why = "no address";
  for (auto* ai = res; ai && fd < 0; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
      continue;
    int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int err = 0;
      socklen_t len = sizeof(err);
      if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1)
        err = ETIMEDOUT;
      else
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    }
    if (rc != 0) {
      why = errno_text();
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  if (fd < 0)
    return failure{"data plane: cannot connect to " + endpoint + ": " + why};
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  tune(fd, timeout);
  tcp_link link(fd, 0);
  if (auto ok = prove_key(fd, key, rank, to, endpoint); !ok)
    return failure{ok.error()};
  link.peer_rank_ = to;
  return link;
}

status tcp_link::send(const frame_header& h, const void* payload) {
  if (fd_ < 0)
    return failure{"data plane: the connection is closed"};
  auto head = encode(h);
  iovec iov[2];
  iov[0].iov_base = head.data();
  iov[0].iov_len = head.size();
  iov[1].iov_base = const_cast<void*>(payload);
  iov[1].iov_len = h.bytes;
  int cnt = h.bytes > 0 ? 2 : 1;
  size_t total = head.size() + h.bytes;
  size_t sent = 0;
  while (sent < total) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(cnt);
    auto w = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return failure{std::string("data plane: sending a frame: ")
                     + (errno == EAGAIN || errno == EWOULDBLOCK ? "timed out" : errno_text())};
    sent += static_cast<size_t>(w);
    // Advance the vectors past what went out.
    auto left = static_cast<size_t>(w);
    int first = 0;
    while (first < cnt && left >= iov[first].iov_len) {
      left -= iov[first].iov_len;
      ++first;
    }
    if (first < cnt) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
    for (int i = first; i < cnt; ++i)
      iov[i - first] = iov[i];
    cnt -= first;
  }
  return {};
}

expected<frame_header> tcp_link::recv_header(uint64_t max_bytes) {
  if (fd_ < 0)
    return failure{"data plane: the connection is closed"};
  uint8_t head[header_size];
  if (auto ok = read_exact(fd_, head, sizeof(head), "a frame header"); !ok)
    return failure{ok.error()};
  return decode(head, max_bytes);
}

status tcp_link::recv_payload(void* dst, uint64_t bytes) {
  if (fd_ < 0)
    return failure{"data plane: the connection is closed"};
  return read_exact(fd_, dst, bytes, "a frame's payload");
}

// ---- tcp_listener --------------------------------------------------------------------------

tcp_listener::tcp_listener(tcp_listener&& other) noexcept
  : fd_(other.fd_), endpoint_(std::move(other.endpoint_)) {
  other.fd_ = -1;
}

tcp_listener& tcp_listener::operator=(tcp_listener&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = other.fd_;
    endpoint_ = std::move(other.endpoint_);
    other.fd_ = -1;
  }
  return *this;
}

tcp_listener::~tcp_listener() {
  if (fd_ >= 0)
    ::close(fd_);
}

expected<tcp_listener> tcp_listener::listen(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), "0", &hints, &res); rc != 0)
    return failure{"data plane: cannot resolve " + host + ": " + ::gai_strerror(rc)};
  int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::bind(fd, res->ai_addr, res->ai_addrlen) != 0 || ::listen(fd, 64) != 0) {
    auto why = errno_text();
    if (fd >= 0)
      ::close(fd);
    ::freeaddrinfo(res);
    return failure{"data plane: cannot listen on " + host + ": " + why};
  }
  ::freeaddrinfo(res);
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  auto port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                       : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  tcp_listener out;
  out.fd_ = fd;
  auto shown = host == "0.0.0.0" ? std::string("127.0.0.1") : host;
  out.endpoint_ = (shown.find(':') != std::string::npos ? "[" + shown + "]" : shown) + ":"
                  + std::to_string(port);
  return out;
}

expected<tcp_link> tcp_listener::accept(const std::string& key, std::chrono::milliseconds timeout) {
  pollfd p{fd_, POLLIN, 0};
  int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
  if (ready != 1)
    return failure{"data plane: no peer connected within " + std::to_string(timeout.count())
                   + " ms"};
  int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0)
    return failure{"data plane: accept: " + errno_text()};
  return tcp_link::accept_on(
    fd, [&key](uint32_t, uint32_t) -> expected<std::string> { return key; }, timeout);
}

expected<tcp_link> tcp_link::accept_on(int fd, const key_lookup& key_for,
                                       std::chrono::milliseconds timeout,
                                       const std::string& what) {
  tune(fd, timeout);
  tcp_link link(fd, 0); // closes fd on failure
  auto who = check_key(fd, key_for, what);
  if (!who)
    return failure{who.error()};
  link.peer_rank_ = who->first;
  link.to_rank_ = who->second;
  return link;
}

} // namespace monkey::dp
