// SPDX-License-Identifier: Apache-2.0
#include "runtime/dataplane/transport.hpp"
#include "runtime/dataplane/arena.hpp"
#include "runtime/dataplane/futex.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <vector>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "runtime/dataplane/comm.hpp"
#include "runtime/dataplane/reduce.hpp"
#include "runtime/dataplane/tcp_link.hpp"
#include "runtime/ids.hpp"
#include "runtime/net/auth.hpp"

namespace monkey::dp {

status channel::recv_payload_add(dtype t, void* dst, uint64_t bytes) {
  constexpr uint64_t piece = 64 << 10; // stays in the cache; whole elements of any type
  thread_local std::vector<uint64_t> bounce(piece / sizeof(uint64_t));
  auto esz = dtype_size(t);
  auto* out = static_cast<uint8_t*>(dst);
  while (bytes > 0) {
    auto len = std::min(bytes, piece);
    if (auto ok = recv_payload(bounce.data(), len); !ok)
      return ok;
    add_elems(t, out, bounce.data(), len / esz);
    out += len;
    bytes -= len;
  }
  return {};
}

namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string errno_text() {
  return std::strerror(errno);
}

// ---- tcp ---------------------------------------------------------------------------------------

/// The collective lane over a second keyed TCP connection of the pair, non-blocking: the
/// collective thread sends and receives on it in turn.
class tcp_lane final : public lane {
public:
  explicit tcp_lane(tcp_link link) : link_(std::move(link)) {
    ::fcntl(link_.fd(), F_SETFL, ::fcntl(link_.fd(), F_GETFL) | O_NONBLOCK);
  }

  expected<uint64_t> try_write(const void* src, uint64_t n) override {
    auto w = ::send(link_.fd(), src, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (w >= 0)
      return static_cast<uint64_t>(w);
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
      return uint64_t{0};
    return failure{lost_text(errno)};
  }

  expected<uint64_t> try_read(void* dst, uint64_t n, std::optional<dtype> add) override {
    auto* out = static_cast<uint8_t*>(dst);
    if (!add) {
      uint64_t done = 0;
      // Bytes kept from an add that ended inside an element come first.
      for (; carry_ > 0 && done < n; ++done) {
        out[done] = carried_[0];
        std::memmove(carried_, carried_ + 1, --carry_);
      }
      if (done == n)
        return done;
      auto got = recv_some(out + done, n - done);
      if (!got)
        return got;
      return done + *got;
    }
    // Added: through a small buffer; a torn element waits for its other bytes.
    constexpr uint64_t piece = 64 << 10;
    const uint64_t esz = dtype_size(*add);
    if (bounce_.empty())
      bounce_.resize((piece + sizeof(carried_)) / sizeof(uint64_t));
    auto* bounce = reinterpret_cast<uint8_t*>(bounce_.data());
    std::memcpy(bounce, carried_, carry_);
    auto want = std::min<uint64_t>(n, piece) - carry_;
    auto got = recv_some(bounce + carry_, want);
    if (!got)
      return got;
    auto have = carry_ + *got;
    auto whole = have - have % esz;
    if (whole > 0)
      add_elems(*add, dst, bounce, whole / esz);
    carry_ = have - whole;
    std::memcpy(carried_, bounce + whole, carry_);
    return whole;
  }

  status wait(bool for_data, std::chrono::microseconds wait) override {
    pollfd p{link_.fd(), static_cast<short>(for_data ? POLLIN : POLLOUT), 0};
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(wait.count() / 1000000);
    ts.tv_nsec = static_cast<long>((wait.count() % 1000000) * 1000);
    ::ppoll(&p, 1, &ts, nullptr);
    if (p.revents & POLLNVAL)
      return failure{"data plane: the channel is closed"};
    return {}; // an end or an error shows in the next try
  }

  int poll_fd() const override { return link_.fd(); }
  uint64_t piece_bytes() const override {
    static const uint64_t bytes = [] {
      auto* v = std::getenv("MONKEY_DP_TCP_PIECE_KB");
      return std::max<uint64_t>(v ? std::strtoull(v, nullptr, 10) : 1024, 4) << 10;
    }();
    return bytes;
  }
  void shutdown() { link_.shutdown(); }

private:
  expected<uint64_t> recv_some(uint8_t* dst, uint64_t n) {
    auto r = ::recv(link_.fd(), dst, n, MSG_DONTWAIT);
    if (r > 0)
      return static_cast<uint64_t>(r);
    if (r == 0)
      return failure{"data plane: the peer closed the connection"};
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
      return uint64_t{0};
    return failure{lost_text(errno)};
  }

  static std::string lost_text(int e) {
    if (e == EPIPE || e == ECONNRESET)
      return "data plane: the peer closed or reset the connection";
    return std::string("data plane: ") + std::strerror(e);
  }

  tcp_link link_;
  std::vector<uint64_t> bounce_; // (aligned for any element type)
  uint8_t carried_[8] = {};       // the bytes of a torn element (8: the widest type)
  uint64_t carry_ = 0;
};

class tcp_channel final : public channel {
public:
  explicit tcp_channel(tcp_link link) : link_(std::move(link)) {}
  tcp_channel(tcp_link link, tcp_link lane) : link_(std::move(link)) {
    lane_ = std::make_unique<tcp_lane>(std::move(lane));
  }
  ~tcp_channel() override { shutdown(); }
  lane* collective_lane() override { return lane_.get(); }
  expected<bool> wait_readable(milliseconds wait) override {
    return dp::wait_readable(link_.fd(), wait);
  }
  expected<frame_header> recv_header(uint64_t max_bytes) override {
    return link_.recv_header(max_bytes);
  }
  status recv_payload(void* dst, uint64_t bytes) override {
    return link_.recv_payload(dst, bytes);
  }
  status send(const frame_header& h, const void* payload) override {
    return link_.send(h, payload);
  }
  void shutdown() override {
    link_.shutdown();
    if (lane_)
      lane_->shutdown();
  }
  const char* kind() const override { return "tcp"; }

private:
  tcp_link link_;
  std::unique_ptr<tcp_lane> lane_;
};

// ---- the ring ----------------------------------------------------------------------------------

/// The control block ahead of a ring's bytes (its own cache lines per side).
struct ring_control {
  alignas(64) std::atomic<uint64_t> head; ///< bytes ever written (the producer's)
  alignas(64) std::atomic<uint64_t> tail; ///< bytes ever read (the consumer's)
  alignas(64) std::atomic<uint32_t> data_seq;
  std::atomic<uint32_t> data_waiters;
  alignas(64) std::atomic<uint32_t> space_seq;
  std::atomic<uint32_t> space_waiters;
  alignas(64) std::atomic<uint32_t> closed; ///< either side shut the channel down
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "the ring needs lock-free atomics");
constexpr uint64_t control_bytes = 4096;

enum class waited { ready, timed_out, closed, peer_gone };


/// One direction: a byte ring of `cap` (a power of two) bytes behind its control block.
struct ring {
  ring_control* c = nullptr;
  uint8_t* data = nullptr;
  uint64_t cap = 0;
};

/// Whether the process at the other end of `pulse_fd` (a connected Unix socket) still lives.
bool pulse_alive(int pulse_fd) {
  if (pulse_fd < 0)
    return true;
  pollfd p{pulse_fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0)
    return true;
  return (p.revents & (POLLHUP | POLLRDHUP | POLLERR)) == 0;
}

const char* closed_text = "data plane: the channel is closed";
const char* gone_peer_text = "data plane: the peer process went away (its end of the channel closed)";

/// The collective lane over two more rings of the channel's memory (transport.hpp).
class ring_lane final : public lane {
public:
  ring_lane(ring out, ring in, const int* pulse_fd) : out_(out), in_(in), pulse_fd_(pulse_fd) {}

  expected<uint64_t> try_write(const void* src, uint64_t n) override {
    if (closed())
      return failure{closed_text};
    auto& r = out_;
    auto head = r.c->head.load(std::memory_order_relaxed);
    auto space = r.cap - (head - r.c->tail.load(std::memory_order_acquire));
    auto at = head & (r.cap - 1);
    auto len = std::min({n, space, r.cap - at});
    if (len == 0)
      return uint64_t{0};
    std::memcpy(r.data + at, src, len);
    r.c->head.store(head + len, std::memory_order_seq_cst);
    notify(r.c->data_seq, r.c->data_waiters);
    return len;
  }

  expected<uint64_t> try_read(void* dst, uint64_t n, std::optional<dtype> add) override {
    // What the peer wrote before the channel closed is still read (as TCP delivers what was
    // sent before a close): a peer that wrote its last bytes and exited, or whose death the
    // receiving thread noticed first, leaves them readable.
    auto& r = in_;
    auto tail = r.c->tail.load(std::memory_order_relaxed);
    auto avail = r.c->head.load(std::memory_order_acquire) - tail;
    auto at = tail & (r.cap - 1);
    auto len = std::min({n, avail, r.cap - at});
    if (add)
      len -= len % dtype_size(*add); // (the lane's streams keep elements aligned)
    if (len == 0 && closed())
      return failure{closed_text};
    if (len == 0)
      return uint64_t{0};
    if (add)
      add_elems(*add, dst, r.data + at, len / dtype_size(*add));
    else
      std::memcpy(dst, r.data + at, len);
    r.c->tail.store(tail + len, std::memory_order_seq_cst);
    notify(r.c->space_seq, r.c->space_waiters);
    return len;
  }

  status wait(bool for_data, std::chrono::microseconds wait) override {
    auto& r = for_data ? in_ : out_;
    auto& seq = for_data ? r.c->data_seq : r.c->space_seq;
    auto& waiters = for_data ? r.c->data_waiters : r.c->space_waiters;
    auto seen = seq.load(std::memory_order_seq_cst);
    waiters.fetch_add(1, std::memory_order_seq_cst);
    auto is_ready = [&] {
      auto head = r.c->head.load(std::memory_order_seq_cst);
      auto tail = r.c->tail.load(std::memory_order_seq_cst);
      return for_data ? head != tail : head - tail < r.cap;
    };
    if (!is_ready() && !closed())
      futex_wait(&seq, seen, wait);
    waiters.fetch_sub(1, std::memory_order_seq_cst);
    if (for_data && is_ready())
      return {}; // (bytes written before a close are read first)
    return alive();
  }

  status alive() const override {
    if (closed())
      return failure{closed_text};
    if (!pulse_alive(*pulse_fd_))
      return failure{gone_peer_text};
    return {};
  }

private:
  bool closed() const {
    return out_.c->closed.load(std::memory_order_relaxed) != 0
           || in_.c->closed.load(std::memory_order_relaxed) != 0;
  }

  ring out_, in_;
  const int* pulse_fd_;
};

/// The two rings of a channel and what tells whether the peer still lives.
class ring_channel final : public channel {
public:
  /// `mem`: the mapping (unmapped at the end; nullptr for heap memory owned elsewhere).
  ring_channel(ring out, ring in, ring lane_out, ring lane_in, std::shared_ptr<void> mem,
               int pulse_fd, milliseconds timeout, const char* kind)
    : out_(out), in_(in), lane_out_(lane_out), lane_in_(lane_in), mem_(std::move(mem)),
      pulse_fd_(pulse_fd), timeout_(timeout), kind_(kind),
      lane_(lane_out, lane_in, &pulse_fd_) {}
  ~ring_channel() override {
    shutdown();
    if (pulse_fd_ >= 0)
      ::close(pulse_fd_);
  }

  expected<bool> wait_readable(milliseconds wait) override {
    auto w = wait_for(in_.c->data_seq, in_.c->data_waiters,
                      [&] { return in_.c->head.load(std::memory_order_acquire) !=
                                   in_.c->tail.load(std::memory_order_relaxed); },
                      wait);
    if (w == waited::ready)
      return true;
    if (w == waited::timed_out)
      return false;
    return failure{gone_text(w)};
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

  status recv_payload_add(dtype t, void* dst_, uint64_t bytes) override {
    auto& r = in_;
    const uint64_t esz = dtype_size(t);
    if (r.c->tail.load(std::memory_order_relaxed) % esz != 0)
      return channel::recv_payload_add(t, dst_, bytes); // after an odd-sized frame
    auto* dst = static_cast<uint8_t*>(dst_);
    while (bytes > 0) {
      auto tail = r.c->tail.load(std::memory_order_relaxed);
      uint64_t avail = 0;
      auto w = wait_for(r.c->data_seq, r.c->data_waiters,
                        [&] {
                          avail = r.c->head.load(std::memory_order_acquire) - tail;
                          return avail >= std::min<uint64_t>(bytes, esz);
                        },
                        timeout_);
      if (w != waited::ready)
        return failure{gone_text(w) + " (receiving a frame's payload)"};
      auto at = tail & (r.cap - 1);
      auto len = std::min({bytes, avail, r.cap - at});
      len -= len % esz;
      add_elems(t, dst, r.data + at, len / esz);
      r.c->tail.store(tail + len, std::memory_order_seq_cst);
      notify(r.c->space_seq, r.c->space_waiters);
      dst += len;
      bytes -= len;
    }
    return {};
  }

  status send(const frame_header& h, const void* payload) override {
    auto head = encode(h);
    if (auto ok = write(head.data(), head.size()); !ok)
      return ok;
    return write(static_cast<const uint8_t*>(payload), h.bytes);
  }

  bool try_send(const frame_header& h, const void* payload) override {
    auto& r = out_;
    auto total = header_size + h.bytes;
    if (total > r.cap / 4 || closed())
      return false;
    auto head = r.c->head.load(std::memory_order_relaxed);
    if (r.cap - (head - r.c->tail.load(std::memory_order_acquire)) < total)
      return false;
    auto bytes = encode(h);
    put(head, bytes.data(), header_size);
    put(head + header_size, static_cast<const uint8_t*>(payload), h.bytes);
    r.c->head.store(head + total, std::memory_order_seq_cst);
    notify(r.c->data_seq, r.c->data_waiters);
    return true;
  }

  void shutdown() override {
    if (done_.exchange(true))
      return;
    for (auto* c : {out_.c, in_.c, lane_out_.c, lane_in_.c}) {
      c->closed.store(1, std::memory_order_seq_cst);
      c->data_seq.fetch_add(1);
      c->space_seq.fetch_add(1);
      futex_wake(&c->data_seq);
      futex_wake(&c->space_seq);
    }
    if (pulse_fd_ >= 0)
      ::shutdown(pulse_fd_, SHUT_RDWR);
  }

  const char* kind() const override { return kind_; }
  lane* collective_lane() override { return &lane_; }
  void set_poll_rounds(int rounds) override { spin_.store(rounds, std::memory_order_relaxed); }

private:
  /// Waits until `ready()` or `wait` passes; spins a little first, then sleeps on the
  /// futex, looking at the peer's pulse between sleeps.
  template <class Ready>
  waited wait_for(std::atomic<uint32_t>& seq, std::atomic<uint32_t>& waiters, Ready ready,
                  milliseconds wait) {
    for (int i = 0, n = spin_.load(std::memory_order_relaxed); i < n; ++i) {
      if (ready())
        return waited::ready;
      cpu_pause();
      // A thread woken meanwhile on this core (the app's, to answer) goes first.
      if ((i & 255) == 255)
        std::this_thread::yield();
    }
    auto until = clock::now() + wait;
    for (;;) {
      auto seen = seq.load(std::memory_order_seq_cst);
      waiters.fetch_add(1, std::memory_order_seq_cst);
      bool now_ready = ready();
      if (!now_ready && !closed()) {
        auto left = std::chrono::duration_cast<milliseconds>(until - clock::now());
        if (left.count() > 0)
          futex_wait(&seq, seen, std::min(left, milliseconds(50)));
      }
      waiters.fetch_sub(1, std::memory_order_seq_cst);
      if (now_ready || ready())
        return waited::ready;
      if (closed())
        return waited::closed;
      if (!peer_alive())
        return waited::peer_gone;
      if (clock::now() >= until)
        return waited::timed_out;
    }
  }

  bool closed() const {
    return out_.c->closed.load(std::memory_order_relaxed) != 0
           || in_.c->closed.load(std::memory_order_relaxed) != 0;
  }

  bool peer_alive() const { return pulse_alive(pulse_fd_); }

  std::string gone_text(waited w) const {
    if (w == waited::closed)
      return closed_text;
    if (w == waited::peer_gone)
      return gone_peer_text;
    return "data plane: no progress for " + std::to_string(timeout_.count())
           + " ms (the peer is frozen or gone): timed out";
  }

  /// Copies `n` bytes to the out ring at stream position `at` (wrapping).
  void put(uint64_t at, const uint8_t* src, uint64_t n) {
    auto& r = out_;
    auto off = at & (r.cap - 1);
    auto first = std::min(n, r.cap - off);
    std::memcpy(r.data + off, src, first);
    if (n > first)
      std::memcpy(r.data, src + first, n - first);
  }

  status write(const uint8_t* src, uint64_t n) {
    auto& r = out_;
    // Pieces of at most a quarter of the ring, so that the reader starts early.
    const uint64_t piece = std::max<uint64_t>(std::min<uint64_t>(r.cap / 4, 256 << 10), 1);
    while (n > 0) {
      if (closed()) // the peer shut the channel down: nobody reads what we write
        return failure{gone_text(waited::closed)};
      auto head = r.c->head.load(std::memory_order_relaxed);
      uint64_t space = 0;
      auto w = wait_for(r.c->space_seq, r.c->space_waiters,
                        [&] {
                          space = r.cap - (head - r.c->tail.load(std::memory_order_acquire));
                          return space > 0;
                        },
                        timeout_);
      if (w != waited::ready)
        return failure{gone_text(w)};
      auto at = head & (r.cap - 1);
      auto len = std::min({n, space, r.cap - at, piece});
      std::memcpy(r.data + at, src, len);
      r.c->head.store(head + len, std::memory_order_seq_cst);
      notify(r.c->data_seq, r.c->data_waiters);
      src += len;
      n -= len;
    }
    return {};
  }

  status read(uint8_t* dst, uint64_t n, const char* what) {
    auto& r = in_;
    while (n > 0) {
      auto tail = r.c->tail.load(std::memory_order_relaxed);
      uint64_t avail = 0;
      auto w = wait_for(r.c->data_seq, r.c->data_waiters,
                        [&] {
                          avail = r.c->head.load(std::memory_order_acquire) - tail;
                          return avail > 0;
                        },
                        timeout_);
      if (w != waited::ready)
        return failure{gone_text(w) + " (receiving " + what + ")"};
      auto at = tail & (r.cap - 1);
      auto len = std::min({n, avail, r.cap - at});
      std::memcpy(dst, r.data + at, len);
      r.c->tail.store(tail + len, std::memory_order_seq_cst);
      notify(r.c->space_seq, r.c->space_waiters);
      dst += len;
      n -= len;
    }
    return {};
  }

  ring out_, in_, lane_out_, lane_in_;
  std::shared_ptr<void> mem_;
  int pulse_fd_ = -1;
  milliseconds timeout_;
  const char* kind_;
  ring_lane lane_;
  std::atomic<bool> done_{false};
  /// Polling a frame's wait (set_poll_rounds): catches the peer's next piece or answer
  /// without a wake-up's latency; sleeping leaves the core to the threads that copy.
  std::atomic<int> spin_{poll_rounds(1 << 30, 2000)};
};

uint64_t round_capacity(uint64_t capacity) {
  uint64_t cap = 4096;
  while (cap < capacity)
    cap <<= 1;
  return cap;
}

/// A channel's memory: its two rings and its lane's two, each [control][bytes].
struct layout {
  uint64_t cap = 0, lane_cap = 0;
  uint64_t bytes() const { return 2 * (control_bytes + cap) + 2 * (control_bytes + lane_cap); }
};

/// The rings laid out in `base`: A and B of `cap` bytes, then lane rings C and D. The dialer
/// writes A and C, and reads B and D.
std::array<ring, 4> lay_out(uint8_t* base, layout l, bool init) {
  std::array<ring, 4> rs;
  for (int k = 0; k < 4; ++k) {
    auto cap = k < 2 ? l.cap : l.lane_cap;
    rs[static_cast<size_t>(k)] = ring{reinterpret_cast<ring_control*>(base), base + control_bytes,
                                      cap};
    if (init)
      new (base) ring_control{};
    base += control_bytes + cap;
  }
  return rs;
}

/// One byte with room for one descriptor (SCM_RIGHTS) beside it: what the shm transport's
/// listener sends and its dialer receives.
struct fd_message {
  char byte = 1;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  fd_message() {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl;
    msg.msg_controllen = sizeof(ctl);
  }
  fd_message(const fd_message&) = delete;
  fd_message& operator=(const fd_message&) = delete;
};

/// Hands `fd` over with one byte 1 (`what` names it in errors).
status send_fd(int sock, int fd, const char* what = "shared segment") {
  fd_message m;
  auto* cm = CMSG_FIRSTHDR(&m.msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cm), &fd, sizeof(int));
  if (::sendmsg(sock, &m.msg, MSG_NOSIGNAL) != 1)
    return failure{std::string("data plane: handing over the ") + what + ": " + errno_text()};
  return {};
}

/// The descriptor the peer handed over; `optional`: a byte 0 without one says it has none
/// (-1).
expected<int> recv_fd(int sock, const char* what = "shared segment", bool optional = false) {
  fd_message m;
  auto r = ::recvmsg(sock, &m.msg, MSG_CMSG_CLOEXEC);
  if (r != 1)
    return failure{std::string("data plane: receiving the ") + what + ": "
                   + (r == 0 ? "the peer closed the connection" : errno_text())};
  auto* cm = CMSG_FIRSTHDR(&m.msg);
  int fd = -1;
  if (cm && cm->cmsg_type == SCM_RIGHTS)
    std::memcpy(&fd, CMSG_DATA(cm), sizeof(int));
  if (optional && m.byte == 0) {
    if (fd >= 0)
      ::close(fd);
    return -1;
  }
  if (fd < 0)
    return failure{std::string("data plane: the peer sent no ") + what};
  return fd;
}

/// The arenas' swap (after the ring segment): a byte, 1 with a descriptor, 0 without.
status send_arena_fd(int sock, int fd) {
  if (fd >= 0)
    return send_fd(sock, fd, "arena");
  char none = 0;
  if (::send(sock, &none, 1, MSG_NOSIGNAL) != 1)
    return failure{"data plane: sending the arena: " + errno_text()};
  return {};
}

/// Maps the peer's arena when both sides have one (a failure to map leaves it unmapped: the
/// all-reduces over this pair then take the rings, as call_slot says).
peer_memory swap_arenas(int sock, int own_fd, bool send_first, std::string& why) {
  peer_memory out;
  expected<int> theirs = -1;
  if (send_first) {
    if (auto ok = send_arena_fd(sock, own_fd); !ok) {
      why = ok.error();
      return out;
    }
    theirs = recv_fd(sock, "arena", true);
  } else {
    theirs = recv_fd(sock, "arena", true);
    if (theirs)
      if (auto ok = send_arena_fd(sock, own_fd); !ok) {
        ::close(*theirs);
        why = ok.error();
        return out;
      }
  }
  if (!theirs) {
    why = theirs.error();
    return out;
  }
  if (*theirs < 0)
    return out;
  if (own_fd >= 0)
    if (auto m = map_peer_arena(*theirs, out.bytes))
      out.base = std::move(*m);
  ::close(*theirs);
  return out;
}

/// A word of this process's memory that peers read to prove CMA works (peer_memory).
const uint64_t& cma_probe_word() {
  static const uint64_t word = [] {
    std::random_device rd;
    return (uint64_t{rd()} << 32 | rd()) | 1;
  }();
  return word;
}

/// Whether sends by address may go between the two ends of `sock` (peer_memory): each shows
/// the other where its probe word lies and what it holds, reads the other's with
/// process_vm_readv, and says whether it could. A failure of the socket sets `why`.
void probe_cma(int sock, peer_memory& out, std::string& why) {
  static const bool enabled = [] {
    auto* v = std::getenv("MONKEY_DP_CMA");
    return !v || std::string(v) != "0";
  }();
  uint64_t mine[2] = {enabled ? reinterpret_cast<uint64_t>(&cma_probe_word()) : 0,
                      enabled ? cma_probe_word() : 0};
  uint64_t theirs[2] = {0, 0};
  if (::send(sock, mine, sizeof(mine), MSG_NOSIGNAL) != sizeof(mine)
      || ::recv(sock, theirs, sizeof(theirs), MSG_WAITALL) != sizeof(theirs)) {
    why = "data plane: swapping the memory probes: " + errno_text();
    return;
  }
  ucred cred{};
  socklen_t len = sizeof(cred);
  uint8_t can_read = 0;
  if (enabled && theirs[0] != 0
      && ::getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.pid > 0) {
    uint64_t got = 0;
    iovec local{&got, sizeof(got)};
    iovec remote{reinterpret_cast<void*>(theirs[0]), sizeof(got)};
    if (::process_vm_readv(cred.pid, &local, 1, &remote, 1, 0) == sizeof(got) && got == theirs[1])
      can_read = 1;
  }
  uint8_t they_read = 0;
  if (::send(sock, &can_read, 1, MSG_NOSIGNAL) != 1
      || ::recv(sock, &they_read, 1, MSG_WAITALL) != 1) {
    why = "data plane: swapping the memory probes: " + errno_text();
    return;
  }
  out.read_pid = can_read ? cred.pid : 0;
  out.reads_me = they_read == 1;
}

/// The arenas' swap, then the CMA probe (peer_memory).
peer_memory swap_memory(int sock, int own_fd, bool send_first, std::string& why) {
  auto out = swap_arenas(sock, own_fd, send_first, why);
  if (why.empty())
    probe_cma(sock, out, why);
  return out;
}

std::shared_ptr<void> map_segment(int fd, uint64_t bytes, std::string& why) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    why = "data plane: mapping the shared segment: " + errno_text();
    return nullptr;
  }
  return std::shared_ptr<void>(p, [bytes](void* q) { ::munmap(q, bytes); });
}

void set_timeouts(int fd, milliseconds t) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

sockaddr_un abstract_address(const std::string& name, socklen_t& len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  a.sun_path[0] = '\0';
  auto n = std::min(name.size(), sizeof(a.sun_path) - 1);
  std::memcpy(a.sun_path + 1, name.data(), n);
  len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

} // namespace

void futex_wait(std::atomic<uint32_t>* word, uint32_t seen, std::chrono::microseconds wait) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(wait.count() / 1000000);
  ts.tv_nsec = static_cast<long>((wait.count() % 1000000) * 1000);
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

int poll_rounds(int ranks, int crowded) {
  static const char* env = std::getenv("MONKEY_DP_SPIN");
  if (env)
    return std::atoi(env);
  return static_cast<unsigned>(ranks) <= std::thread::hardware_concurrency() ? 50000 : crowded;
}

void futex_wake(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void notify(std::atomic<uint32_t>& seq, std::atomic<uint32_t>& waiters) {
  seq.fetch_add(1, std::memory_order_seq_cst);
  if (waiters.load(std::memory_order_seq_cst) != 0)
    futex_wake(&seq);
}

std::unique_ptr<channel> make_tcp_channel(tcp_link link) {
  return std::make_unique<tcp_channel>(std::move(link));
}

std::unique_ptr<channel> make_tcp_channel(tcp_link link, tcp_link lane) {
  return std::make_unique<tcp_channel>(std::move(link), std::move(lane));
}

uint64_t lane_capacity(uint64_t ring) {
  static const uint64_t most = [] {
    auto* v = std::getenv("MONKEY_DP_LANE_KB");
    auto kb = v ? std::strtoull(v, nullptr, 10) : 1024;
    return round_capacity(std::max<uint64_t>(kb, 4) << 10);
  }();
  return std::min(round_capacity(ring), most);
}

std::pair<std::unique_ptr<channel>, std::unique_ptr<channel>>
make_local_pair(uint64_t capacity, milliseconds timeout) {
  layout l{round_capacity(capacity), lane_capacity(capacity)};
  void* p = std::aligned_alloc(4096, l.bytes());
  if (!p)
    throw std::bad_alloc();
  std::shared_ptr<void> mem(p, [](void* q) { std::free(q); });
  auto r = lay_out(static_cast<uint8_t*>(p), l, true);
  return {std::make_unique<ring_channel>(r[0], r[1], r[2], r[3], mem, -1, timeout, "local"),
          std::make_unique<ring_channel>(r[1], r[0], r[3], r[2], mem, -1, timeout, "local")};
}

// ---- unix listener / shm ----------------------------------------------------------------------

unix_listener::unix_listener(unix_listener&& other) noexcept
  : fd_(other.fd_), name_(std::move(other.name_)) {
  other.fd_ = -1;
}

unix_listener& unix_listener::operator=(unix_listener&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = other.fd_;
    name_ = std::move(other.name_);
    other.fd_ = -1;
  }
  return *this;
}

unix_listener::~unix_listener() {
  if (fd_ >= 0)
    ::close(fd_);
}

expected<unix_listener> unix_listener::listen() {
  unix_listener out;
  out.name_ = "monkey-dp-" + to_hex(make_nonce()).substr(0, 24);
  out.fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  socklen_t len = 0;
  auto addr = abstract_address(out.name_, len);
  if (out.fd_ < 0 || ::bind(out.fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0
      || ::listen(out.fd_, 64) != 0)
    return failure{"data plane: cannot listen on a Unix socket: " + errno_text()};
  return out;
}

expected<unix_listener::accepted> unix_listener::accept(const std::string& key,
                                                        uint64_t capacity,
                                                        milliseconds timeout, int arena_fd) {
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1)
    return failure{"data plane: no peer connected within " + std::to_string(timeout.count())
                   + " ms"};
  int sock = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (sock < 0)
    return failure{"data plane: accept: " + errno_text()};
  set_timeouts(sock, timeout);
  auto who = check_key(sock, key);
  if (!who) {
    ::close(sock);
    return failure{who.error()};
  }
  layout l{round_capacity(capacity), lane_capacity(capacity)};
  auto bytes = l.bytes();
  int seg = static_cast<int>(
    ::syscall(SYS_memfd_create, "monkey-dp", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  std::string why;
  // Sealed at its size: the peer can neither shrink it under us (SIGBUS) nor grow it.
  if (seg < 0 || ::ftruncate(seg, static_cast<off_t>(bytes)) != 0
      || ::fcntl(seg, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    why = "data plane: creating the shared segment: " + errno_text();
    if (seg >= 0)
      ::close(seg);
    ::close(sock);
    return failure{why};
  }
  auto mem = map_segment(seg, bytes, why);
  if (!mem) {
    ::close(seg);
    ::close(sock);
    return failure{why};
  }
  auto r = lay_out(static_cast<uint8_t*>(mem.get()), l, true);
  // The layout travels ahead of the segment's descriptor.
  uint64_t sizes[2] = {l.cap, l.lane_cap};
  auto sent = ::send(sock, sizes, sizeof(sizes), MSG_NOSIGNAL);
  auto handed = sent == sizeof(sizes) ? send_fd(sock, seg)
                                        : status{failure{"data plane: sending the segment size: "
                                                         + errno_text()}};
  ::close(seg);
  if (!handed) {
    ::close(sock);
    return failure{handed.error()};
  }
  accepted out;
  out.arena = swap_memory(sock, arena_fd, true, why);
  if (!why.empty()) {
    ::close(sock);
    return failure{why};
  }
  out.from = who->first;
  out.to = who->second;
  // The dialer writes rings A and C and reads B and D.
  out.ch = std::make_unique<ring_channel>(r[1], r[0], r[3], r[2], mem, sock, timeout, "shm");
  return out;
}

expected<std::unique_ptr<channel>> dial_shm(const std::string& name, const std::string& key,
                                            uint32_t from, uint32_t to,
                                            milliseconds connect_timeout, milliseconds timeout,
                                            int arena_fd, peer_memory* arena) {
  int sock = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  socklen_t len = 0;
  auto addr = abstract_address(name, len);
  if (sock >= 0)
    set_timeouts(sock, connect_timeout); // a full backlog must not block connect() for ever
  if (sock < 0 || ::connect(sock, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    auto why = errno_text();
    if (sock >= 0)
      ::close(sock);
    return failure{"data plane: cannot connect to @" + name + ": " + why};
  }
  if (auto ok = prove_key(sock, key, from, to, "@" + name); !ok) {
    ::close(sock);
    return failure{ok.error()};
  }
  uint64_t sizes[2] = {0, 0};
  auto power = [](uint64_t v) { return v >= 4096 && v <= (uint64_t{1} << 32) && (v & (v - 1)) == 0; };
  if (::recv(sock, sizes, sizeof(sizes), MSG_WAITALL) != sizeof(sizes) || !power(sizes[0])
      || !power(sizes[1])) {
    ::close(sock);
    return failure{"data plane: @" + name + " sent no usable segment layout"};
  }
  layout l{sizes[0], sizes[1]};
  auto seg = recv_fd(sock);
  if (!seg) {
    ::close(sock);
    return failure{seg.error()};
  }
  struct stat st {};
  if (::fstat(*seg, &st) != 0 || static_cast<uint64_t>(st.st_size) < l.bytes()) {
    ::close(*seg);
    ::close(sock);
    return failure{"data plane: @" + name + " handed over a segment smaller than its layout"};
  }
  std::string why;
  auto mem = map_segment(*seg, l.bytes(), why);
  ::close(*seg);
  if (!mem) {
    ::close(sock);
    return failure{why};
  }
  auto swapped = swap_memory(sock, arena_fd, false, why);
  if (!why.empty()) {
    ::close(sock);
    return failure{why};
  }
  if (arena)
    *arena = std::move(swapped);
  auto r = lay_out(static_cast<uint8_t*>(mem.get()), l, false);
  return std::unique_ptr<channel>(
    std::make_unique<ring_channel>(r[0], r[1], r[2], r[3], mem, sock, timeout, "shm"));
}

} // namespace monkey::dp
