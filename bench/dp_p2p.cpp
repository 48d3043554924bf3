// SPDX-License-Identifier: Apache-2.0
// Data plane point-to-point between two processes (issue #11, step 1), side by side in one
// run: the TCP link (frames with a header, keyed connection, vectored writes) against a
// plain socket pair moving the same bytes with send/recv, both over loopback. For each size,
// the bandwidth of ROUNDS one-way transfers acknowledged by one byte, and the round-trip
// latency of an 8-byte message (median); and the kernel's bound on a 2-rank all-reduce of
// that size over loopback TCP (plain sockets sending it both ways at once). Prints lines per
// size and one JSON line.
//   dp_p2p [ROUNDS] [SIZES_BYTES...]    (default: 50 8 4194304 67108864)
#include <algorithm>
#include <arpa/inet.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "runtime/dataplane/tcp_link.hpp"

using namespace monkey;
using clock_type = std::chrono::steady_clock;

namespace {

const std::string key = "dp-bench-key";

bool full_recv(int fd, char* p, size_t n) {
  while (n > 0) {
    auto r = ::recv(fd, p, n, 0);
    if (r <= 0)
      return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool full_send(int fd, const char* p, size_t n) {
  while (n > 0) {
    auto w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0)
      return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

/// A listening socket on loopback, at `a`.
int listen_loopback(sockaddr_in& a) {
  int l = ::socket(AF_INET, SOCK_STREAM, 0);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  ::listen(l, 1);
  socklen_t len = sizeof(a);
  ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len);
  return l;
}

/// Plain socket: a listener on loopback, the child connects; returns the seconds per round.
double plain(size_t bytes, int rounds) {
  sockaddr_in a{};
  int l = listen_loopback(a);
  std::vector<char> buf(std::max<size_t>(bytes, 1), 'x');
  pid_t child = ::fork();
  if (child == 0) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    for (int r = 0; r < rounds; ++r) {
      if (!full_recv(fd, buf.data(), bytes))
        _exit(1);
      char ack = 1;
      full_send(fd, &ack, 1);
    }
    _exit(0);
  }
  int fd = ::accept(l, nullptr, nullptr);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  auto t = clock_type::now();
  for (int r = 0; r < rounds; ++r) {
    full_send(fd, buf.data(), bytes);
    char ack;
    full_recv(fd, &ack, 1);
  }
  double s = std::chrono::duration<double>(clock_type::now() - t).count() / rounds;
  ::close(fd);
  ::close(l);
  ::waitpid(child, nullptr, 0);
  return s;
}

/// The kernel's bound on a 2-rank all-reduce of `bytes` over loopback TCP: both processes
/// send `bytes` to each other at once over a plain socket pair (non-blocking, 1 MB writes,
/// poll() when stuck), what each member of the ring does over its two steps (half of it in
/// the reduce-scatter, half in the allgather), and OpenMPI's exchange too. The median
/// seconds of an exchange.
double exchange(size_t bytes, int rounds) {
  sockaddr_in a{};
  int l = listen_loopback(a);
  std::vector<char> out(std::max<size_t>(bytes, 1), 'x'), in(out.size());
  auto run = [&](int fd, bool timed) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::vector<double> t;
    for (int r = 0; r < rounds; ++r) {
      char sync = 0; // both start together: a byte each way
      full_send(fd, &sync, 1);
      full_recv(fd, &sync, 1);
      auto t0 = clock_type::now();
      size_t sent = 0, got = 0;
      while (sent < bytes || got < bytes) {
        bool moved = false;
        if (sent < bytes) {
          auto w = ::send(fd, out.data() + sent, std::min<size_t>(bytes - sent, 1 << 20),
                          MSG_NOSIGNAL | MSG_DONTWAIT);
          if (w > 0) {
            sent += static_cast<size_t>(w);
            moved = true;
          }
        }
        if (got < bytes) {
          auto g = ::recv(fd, in.data() + got, bytes - got, MSG_DONTWAIT);
          if (g == 0)
            return t;
          if (g > 0) {
            got += static_cast<size_t>(g);
            moved = true;
          }
        }
        if (!moved) {
          pollfd p{fd, static_cast<short>((got < bytes ? POLLIN : 0) | (sent < bytes ? POLLOUT : 0)), 0};
          ::poll(&p, 1, 100);
        }
      }
      if (timed)
        t.push_back(std::chrono::duration<double>(clock_type::now() - t0).count());
    }
    return t;
  };
  pid_t child = ::fork();
  if (child == 0) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    run(fd, false);
    _exit(0);
  }
  int fd = ::accept(l, nullptr, nullptr);
  auto t = run(fd, true);
  ::close(fd);
  ::close(l);
  ::waitpid(child, nullptr, 0);
  if (t.empty())
    return 0;
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/// The data plane's TCP link: frames of float32, the same bytes.
double link(size_t bytes, int rounds) {
  auto listener = dp::tcp_listener::listen("127.0.0.1");
  if (!listener) {
    std::fprintf(stderr, "%s\n", listener.error().c_str());
    std::exit(1);
  }
  auto count = bytes / 4;
  std::vector<float> buf(std::max<size_t>(count, 1), 1.0f);
  pid_t child = ::fork();
  if (child == 0) {
    auto c = dp::tcp_link::dial(listener->endpoint(), key, 1, 0, std::chrono::seconds(10));
    if (!c)
      _exit(1);
    for (int r = 0; r < rounds; ++r) {
      auto h = c->recv_header(1ull << 32);
      if (!h || !c->recv_payload(buf.data(), h->bytes))
        _exit(1);
      if (!c->send(dp::make_header(dp::dtype::u8, 1, 0, 0), nullptr))
        _exit(1);
    }
    _exit(0);
  }
  auto s = listener->accept(key, std::chrono::seconds(10));
  if (!s) {
    std::fprintf(stderr, "%s\n", s.error().c_str());
    std::exit(1);
  }
  auto h = dp::make_header(dp::dtype::f32, 0, 7, count);
  auto t = clock_type::now();
  for (int r = 0; r < rounds; ++r) {
    s->send(h, buf.data());
    s->recv_header(0);
  }
  double secs = std::chrono::duration<double>(clock_type::now() - t).count() / rounds;
  ::waitpid(child, nullptr, 0);
  return secs;
}

} // namespace

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 50;
  std::vector<size_t> sizes;
  for (int i = 2; i < argc; ++i)
    sizes.push_back(static_cast<size_t>(std::atoll(argv[i])));
  if (sizes.empty())
    sizes = {8, 4u << 20, 64u << 20};
  std::string json = "[";
  for (auto bytes : sizes) {
    int r = bytes >= (64u << 20) ? std::max(3, rounds / 10) : rounds;
    double p = plain(bytes, r), l = link(bytes, r);
    if (bytes <= 64) {
      std::printf("%9zu B: round trip plain socket %.1f us | data plane link %.1f us (%.2fx)\n",
                  bytes, p * 1e6, l * 1e6, p / l);
    } else {
      std::printf("%9zu B: plain socket %7.2f GB/s | data plane link %7.2f GB/s (%.2fx the socket)\n",
                  bytes, bytes / p / 1e9, bytes / l / 1e9, p / l);
    }
    double x = 0;
    if (bytes > 64) {
      x = exchange(bytes, r);
      std::printf("%9zu B: both ways at once over plain sockets %.0f us: a 2-rank TCP "
                  "all-reduce of it (each member sends and receives it all) at most %.2f GB/s\n",
                  bytes, x * 1e6, x > 0 ? bytes / x / 1e9 : 0.0);
    }
    char buf[320];
    std::snprintf(buf, sizeof(buf),
                  "%s{\"bytes\": %zu, \"plain_s\": %.9f, \"link_s\": %.9f, \"exchange_s\": %.9f}",
                  json.size() > 1 ? ", " : "", bytes, p, l, x);
    json += buf;
  }
  std::printf("%s]\n", json.c_str());
  return 0;
}
