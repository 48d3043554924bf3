// SPDX-License-Identifier: Apache-2.0
#include "runtime/checkpoint/transfer.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fcntl.h>
#include <memory>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <random>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

namespace monkey::ckpt {

namespace {

constexpr const char* greeting = "MKCK1 ";
constexpr int max_connections = 16;
constexpr size_t chunk = 1 << 20;

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

bool send_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    auto w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

/// Reads one line (without '\n'), at most `max` bytes; false on error or end.
bool read_line(int fd, std::string& line, size_t max) {
  line.clear();
  char c;
  while (line.size() <= max) {
    auto n = ::recv(fd, &c, 1, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    if (c == '\n')
      return true;
    line.push_back(c);
  }
  return false;
}

std::string random_ticket() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::random_device rd;
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%016llx%016llx",
                static_cast<unsigned long long>(rng() ^ rd()),
                static_cast<unsigned long long>(rng() ^ (static_cast<uint64_t>(rd()) << 32)));
  return buf;
}

bool split_endpoint(const std::string& ep, std::string& host, std::string& port) {
  auto colon = ep.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == ep.size())
    return false;
  host = ep.substr(0, colon);
  port = ep.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return true;
}

expected<int> dial(const std::string& endpoint, std::chrono::milliseconds timeout) {
  std::string host, port;
  if (!split_endpoint(endpoint, host, port))
    return failure{"'" + endpoint + "' is not host:port"};
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0)
    return failure{"cannot resolve " + endpoint + ": " + ::gai_strerror(rc)};
  std::string why = "no address";
  for (auto* ai = res; ai; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
      continue;
    int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = ::poll(&p, 1, static_cast<int>(timeout.count())) == 1 ? 0 : -1;
      int err = 0;
      socklen_t len = sizeof(err);
      if (rc == 0 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err != 0) {
        errno = err;
        rc = -1;
      } else if (rc != 0) {
        errno = ETIMEDOUT;
      }
    }
    if (rc == 0) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      set_timeouts(fd, timeout);
      ::freeaddrinfo(res);
      return fd;
    }
    why = errno_text();
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return failure{"cannot connect to the blob server at " + endpoint + ": " + why};
}


} // namespace

blob_server::blob_server(store& s) : store_(s) {}

blob_server::~blob_server() {
  stop();
}

expected<std::string> blob_server::start(const std::string& host) {
  std::string bind_host = host.empty() ? "0.0.0.0" : host;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(bind_host.c_str(), "0", &hints, &res); rc != 0)
    return failure{"blob server: cannot resolve " + bind_host + ": " + ::gai_strerror(rc)};
  int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (fd < 0 || ::bind(fd, res->ai_addr, res->ai_addrlen) != 0 || ::listen(fd, 64) != 0) {
    auto why = errno_text();
    if (fd >= 0)
      ::close(fd);
    ::freeaddrinfo(res);
    return failure{"blob server: cannot listen on " + bind_host + ": " + why};
  }
  ::freeaddrinfo(res);
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  uint16_t port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                           : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  listen_fd_ = fd;
  auto shown = bind_host == "0.0.0.0" ? std::string("127.0.0.1") : bind_host;
  if (shown.find(':') != std::string::npos)
    shown = "[" + shown + "]";
  endpoint_ = shown + ":" + std::to_string(port);
  acceptor_ = std::thread([this] { accept_loop(); });
  return endpoint_;
}

std::string blob_server::grant(const manifest& m, std::chrono::seconds ttl) {
  auto t = random_ticket();
  auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto it = tickets_.begin(); it != tickets_.end();)
    it = it->second.until < now ? tickets_.erase(it) : std::next(it);
  tickets_[t] = ticket{m, now + ttl};
  return t;
}

void blob_server::stop() {
  if (stopping_.exchange(true))
    return;
  if (listen_fd_ >= 0)
    ::shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable())
    acceptor_.join();
  if (listen_fd_ >= 0)
    ::close(listen_fd_);
  listen_fd_ = -1;
  for (int i = 0; i < 3000 && active_ > 0; ++i) // transfers time out by themselves
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

void blob_server::accept_loop() {
  while (!stopping_) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED)
        continue;
      if (stopping_)
        return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10)); // EMFILE and the like
      continue;
    }
    if (active_ >= max_connections) {
      static const char busy[] = "ERR busy: too many transfers at once; try again\n";
      send_all(fd, busy, sizeof(busy) - 1);
      ::close(fd);
      continue;
    }
    ++active_;
    std::thread([this, fd] {
      serve(fd);
      ::close(fd);
      --active_;
    }).detach();
  }
}

void blob_server::serve(int fd) {
  set_timeouts(fd, std::chrono::seconds(30));
  std::string line;
  auto refuse = [&](const std::string& why) {
    auto msg = "ERR " + why + "\n";
    send_all(fd, msg.data(), msg.size());
  };
  if (!read_line(fd, line, 128) || line.rfind(greeting, 0) != 0)
    return refuse("bad request (expected 'MKCK1 <ticket>')");
  auto t = line.substr(std::strlen(greeting));
  manifest piece;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto it = tickets_.find(t);
    if (it == tickets_.end() || it->second.until < std::chrono::steady_clock::now())
      return refuse("unknown or expired ticket");
    piece = it->second.piece;
  }
  auto dir = store_.dir_of(piece);
  // Every file is opened and its size checked before anything is sent.
  std::vector<int> fds;
  auto close_all = [&] {
    for (int f : fds)
      ::close(f);
  };
  for (auto& f : piece.files) {
    int in = ::open((dir + "/" + f.name).c_str(), O_RDONLY | O_CLOEXEC);
    struct stat sb {};
    if (in < 0 || ::fstat(in, &sb) != 0 || static_cast<uint64_t>(sb.st_size) != f.size) {
      if (in >= 0)
        ::close(in);
      close_all();
      return refuse("the piece's file " + f.name + " is missing or changed on this node");
    }
    fds.push_back(in);
  }
  if (!send_all(fd, "OK\n", 3))
    return close_all();
  for (size_t i = 0; i < fds.size(); ++i) {
    off_t off = 0;
    auto left = piece.files[i].size;
    while (left > 0) {
      auto n = ::sendfile(fd, fds[i], &off, std::min<uint64_t>(left, 1ull << 30));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return close_all();
      left -= static_cast<uint64_t>(n);
    }
  }
  close_all();
  ++served_;
}

expected<manifest> pull(store& s, const std::string& endpoint, const std::string& ticket,
                        const manifest& m, std::chrono::milliseconds io_timeout) {
  if (s.has(m))
    return m; // already here (a retried push)
  auto dir = s.begin_receive(m);
  if (!dir)
    return failure{dir.error()};
  auto fail = [&](const std::string& why) -> expected<manifest> {
    s.abandon(*dir);
    return failure{"checkpoint of job " + m.job + " step " + std::to_string(m.step)
                   + " from " + endpoint + ": " + why};
  };
  auto fd = dial(endpoint, io_timeout);
  if (!fd)
    return fail(fd.error());
  std::unique_ptr<int, void (*)(int*)> guard(&*fd, [](int* f) { ::close(*f); });
  auto req = std::string(greeting) + ticket + "\n";
  if (!send_all(*fd, req.data(), req.size()))
    return fail("the request could not be sent: " + errno_text());
  std::string line;
  if (!read_line(*fd, line, 512))
    return fail("no answer: " + errno_text());
  if (line != "OK")
    return fail(line.rfind("ERR ", 0) == 0 ? "refused: " + line.substr(4) : "bad answer");
  std::unique_ptr<char[]> buf(new char[chunk]);
  for (auto& f : m.files) {
    auto path = *dir + "/" + f.name;
    int out = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0)
      return fail("cannot write " + path + ": " + errno_text());
    sha256_stream sha;
    uint64_t left = f.size;
    std::string err;
    while (left > 0 && err.empty()) {
      auto n = ::recv(*fd, buf.get(), std::min<uint64_t>(left, chunk), 0);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        err = n == 0 ? "the connection closed with " + std::to_string(left) + " bytes of "
                         + f.name + " missing"
                     : "receiving " + f.name + ": " + errno_text();
        break;
      }
      sha.add(buf.get(), static_cast<size_t>(n));
      if (!write_all(out, buf.get(), static_cast<size_t>(n)))
        err = "cannot write " + path + ": " + errno_text();
      left -= static_cast<uint64_t>(n);
    }
    ::close(out);
    if (!err.empty())
      return fail(err);
    if (sha.hex() != f.sha256)
      return fail("file " + f.name + " arrived corrupt (its SHA-256 does not match)");
  }
  auto done = s.finish_receive(m, *dir);
  if (!done)
    return failure{done.error()};
  return done;
}

status copy_out(const store& s, const manifest& m, const std::string& dest) {
  std::error_code ec;
  std::filesystem::create_directories(dest, ec);
  if (ec)
    return failure{"cannot make " + dest + ": " + ec.message()};
  auto dir = s.dir_of(m);
  for (auto& f : m.files) {
    auto h = copy_file_sha256(dir + "/" + f.name, dest + "/" + f.name);
    if (!h)
      return failure{h.error()};
    if (*h != f.sha256)
      return failure{"checkpoint of job " + m.job + " step " + std::to_string(m.step) + ": file "
                     + f.name + " is corrupt on this node (its SHA-256 does not match)"};
  }
  return {};
}

} // namespace monkey::ckpt
