// SPDX-License-Identifier: Apache-2.0
#include "runtime/checkpoint/transfer.hpp"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fcntl.h>
#include <memory>
#include <random>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/dataplane/tcp_link.hpp"
#include "runtime/dataplane/tls_channel.hpp"
#include "runtime/dataplane/transport.hpp"
#include "runtime/ids.hpp"
#include "runtime/net/auth.hpp"

namespace monkey::ckpt {

namespace {

constexpr int max_connections = 16;
constexpr uint64_t chunk = 4 << 20;
constexpr size_t secret_digits = 32;

std::string errno_text() {
  return std::strerror(errno);
}

/// "<id>.<secret>" → id and secret; false when malformed.
bool parse_ticket(const std::string& t, uint32_t& id, std::string& secret) {
  auto dot = t.find('.');
  if (dot == std::string::npos || dot == 0 || dot > 8 || t.size() - dot - 1 != secret_digits)
    return false;
  for (size_t i = 0; i < t.size(); ++i)
    if (i != dot && !std::isxdigit(static_cast<unsigned char>(t[i])))
      return false;
  id = static_cast<uint32_t>(std::stoul(t.substr(0, dot), nullptr, 16));
  secret = t.substr(dot + 1);
  return true;
}

/// The channel over a keyed link: TLS-wrapped when `tls` is set.
expected<std::unique_ptr<dp::channel>> wrap(dp::tcp_link link, const tls_ptr& tls, bool server,
                                            std::chrono::milliseconds timeout) {
  if (tls)
    return dp::make_tls_channel(std::move(link), tls, server, timeout);
  return dp::make_tcp_channel(std::move(link));
}

void send_error(dp::channel& ch, const std::string& why) {
  ch.send(dp::make_header(dp::dtype::u8, 0, error_tag, why.size()), why.data());
}

} // namespace

blob_server::blob_server(store& s, tls_ptr tls) : store_(s), tls_(std::move(tls)) {
  std::random_device rd;
  next_id_ = rd() & 0x0fffffffu;
}

blob_server::~blob_server() {
  stop();
}

expected<std::string> blob_server::start(const std::string& host) {
  auto bind_host = host.empty() ? std::string("0.0.0.0") : host;
  auto l = dp::tcp_listener::listen(bind_host);
  if (!l)
    return failure{"blob server: " + l.error()};
  listener_ = std::move(*l);
  endpoint_ = listener_.endpoint();
  acceptor_ = std::thread([this] { accept_loop(); });
  return endpoint_;
}

std::string blob_server::grant(const manifest& m, std::chrono::seconds ttl) {
  auto secret = to_hex(make_nonce().substr(0, secret_digits / 2)); // the system's CSPRNG
  auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto it = tickets_.begin(); it != tickets_.end();)
    it = it->second.until < now ? tickets_.erase(it) : std::next(it);
  auto id = next_id_++ & 0x0fffffffu; // clear of the data plane's lane bit
  tickets_[id] = ticket{secret, m, now + ttl};
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08x", id);
  return std::string(buf) + "." + secret;
}

expected<std::string> blob_server::secret_of(uint32_t id, manifest& piece) {
  std::lock_guard<std::mutex> guard{mtx_};
  auto it = tickets_.find(id);
  if (it == tickets_.end() || it->second.until < std::chrono::steady_clock::now())
    return failure{"unknown or expired ticket"};
  piece = it->second.piece;
  return it->second.secret;
}

void blob_server::stop() {
  if (stopping_.exchange(true))
    return;
  if (listener_.fd() >= 0)
    ::shutdown(listener_.fd(), SHUT_RDWR);
  if (acceptor_.joinable())
    acceptor_.join();
  listener_ = dp::tcp_listener{};
  for (int i = 0; i < 3000 && active_ > 0; ++i) // transfers time out by themselves
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

void blob_server::accept_loop() {
  while (!stopping_) {
    int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED)
        continue;
      if (stopping_)
        return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10)); // EMFILE and the like
      continue;
    }
    if (active_ >= max_connections) {
      // A challenge the dialer answers in vain, then the refusal it reads as the verdict.
      static const char busy[] = "ERR busy: too many transfers at once; try again\n";
      std::string out(32, '\0');
      out += busy;
      ::send(fd, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      ::close(fd);
      continue;
    }
    ++active_;
    std::thread([this, fd] {
      serve(fd);
      --active_;
    }).detach();
  }
}

void blob_server::serve(int fd) {
  constexpr auto timeout = std::chrono::seconds(30);
  manifest piece;
  auto link = dp::tcp_link::accept_on(
    fd,
    [&](uint32_t, uint32_t id) -> expected<std::string> { return secret_of(id, piece); },
    timeout, "the ticket's secret");
  if (!link)
    return; // refused with the reason (the dialer has it)
  auto ch = wrap(std::move(*link), tls_, true, timeout);
  if (!ch)
    return;
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
      return send_error(**ch, "the piece's file " + f.name + " is missing or changed on this node");
    }
    fds.push_back(in);
  }
  std::unique_ptr<char[]> buf(new char[chunk]);
  for (size_t i = 0; i < fds.size(); ++i) {
    auto left = piece.files[i].size;
    while (left > 0) {
      auto n = ::read(fds[i], buf.get(), std::min<uint64_t>(left, chunk));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        close_all();
        return send_error(**ch, "reading " + piece.files[i].name + " on this node: "
                                  + (n == 0 ? std::string("it ended early") : errno_text()));
      }
      auto h = dp::make_header(dp::dtype::u8, 0, static_cast<uint32_t>(i), static_cast<uint64_t>(n));
      if (!(*ch)->send(h, buf.get()))
        return close_all();
      left -= static_cast<uint64_t>(n);
    }
  }
  close_all();
  if ((*ch)->send(dp::make_header(dp::dtype::u8, 0, end_tag, 0), nullptr))
    ++served_;
  // Wait for the client to close (it has read everything), so that the end frame is not
  // lost to a reset.
  (*ch)->wait_readable(std::chrono::milliseconds(timeout));
}

expected<manifest> pull(store& s, const std::string& endpoint, const std::string& ticket,
                        const manifest& m, const tls_ptr& tls,
                        std::chrono::milliseconds io_timeout) {
  if (s.has(m))
    return m; // already here (a retried push)
  uint32_t id = 0;
  std::string secret;
  auto what = "checkpoint of job " + m.job + " step " + std::to_string(m.step) + " from "
              + endpoint + ": ";
  if (!parse_ticket(ticket, id, secret))
    return failure{what + "malformed ticket '" + ticket.substr(0, 64)
                   + "' (expected <id>.<secret>)"};
  auto dir = s.begin_receive(m);
  if (!dir)
    return failure{dir.error()};
  auto fail = [&](const std::string& why) -> expected<manifest> {
    s.abandon(*dir);
    return failure{what + why};
  };
  auto link = dp::tcp_link::dial(endpoint, secret, 0, id, io_timeout);
  if (!link) {
    auto e = link.error();
    if (e.rfind("data plane: ", 0) == 0)
      e = e.substr(12);
    return fail(e);
  }
  auto ch = wrap(std::move(*link), tls, false, io_timeout);
  if (!ch)
    return fail(ch.error());
  std::unique_ptr<char[]> buf(new char[chunk]);
  auto next = [&](uint32_t want_tag, uint64_t most) -> expected<dp::frame_header> {
    auto h = (*ch)->recv_header(std::max<uint64_t>(chunk, 64 << 10));
    if (!h)
      return failure{h.error()};
    if (h->tag == error_tag) {
      std::string why(h->bytes, '\0');
      if (auto ok = (*ch)->recv_payload(why.data(), why.size()); !ok)
        return failure{ok.error()};
      return failure{"refused: " + why};
    }
    if (h->type != dp::dtype::u8 || h->tag != want_tag || h->bytes > most)
      return failure{"the server sent an unexpected frame (tag " + std::to_string(h->tag) + ", "
                     + std::to_string(h->bytes) + " bytes)"};
    return h;
  };
  for (size_t i = 0; i < m.files.size(); ++i) {
    auto& f = m.files[i];
    auto path = *dir + "/" + f.name;
    int out = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out < 0)
      return fail("cannot write " + path + ": " + errno_text());
    sha256_stream sha;
    uint64_t left = f.size;
    std::string err;
    while (left > 0 && err.empty()) {
      auto h = next(static_cast<uint32_t>(i), std::min(left, chunk));
      if (!h) {
        err = h.error();
        break;
      }
      if (auto ok = (*ch)->recv_payload(buf.get(), h->bytes); !ok) {
        err = "receiving " + f.name + ": " + ok.error();
        break;
      }
      sha.add(buf.get(), h->bytes);
      if (!write_all(out, buf.get(), h->bytes))
        err = "cannot write " + path + ": " + errno_text();
      left -= h->bytes;
    }
    ::close(out);
    if (!err.empty())
      return fail(err);
    if (sha.hex() != f.sha256)
      return fail("file " + f.name + " arrived corrupt (its SHA-256 does not match)");
  }
  if (auto end = next(end_tag, 0); !end)
    return fail(end.error());
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
