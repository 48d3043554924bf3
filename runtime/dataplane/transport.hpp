// SPDX-License-Identifier: Apache-2.0
#pragma once
// The data plane's transports (issue #11; docs/dataplane.md): a channel carries frames
// (frame.hpp) both ways between two ranks, in order. Three kinds:
//
// - tcp:   a keyed TCP connection (tcp_link.hpp), between hosts;
// - shm:   two single-producer single-consumer byte rings in one memfd shared by two
//          processes on one machine, handed over (SCM_RIGHTS) on a keyed Unix socket in the
//          abstract namespace; the socket stays open as the peer's pulse (a killed peer's end
//          closes). memfds have no name: nothing is left in /dev/shm when a process dies;
// - local: the same rings in this process's memory, between two ranks of one host.
//
// Calls block (with deadlines) and belong to transport threads, never an actor's. One thread
// sends and one receives on a channel at a time. Plain C++: no CAF.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "runtime/dataplane/frame.hpp"
#include "runtime/expected.hpp"

namespace monkey::dp {

/// A channel's second byte stream each way, reserved for the collective thread: calls that
/// never block, on raw bytes whose layout both ends derive from the collective, so that one
/// thread moves a ring all-reduce's data both ways without waking another (comm.cpp).
class lane {
public:
  virtual ~lane() = default;
  /// Copies up to `n` bytes into the outgoing stream; how many went (0: no room now). An
  /// error when the channel is closed.
  virtual expected<uint64_t> try_write(const void* src, uint64_t n) = 0;
  /// Takes up to `n` bytes of the incoming stream: copied to `dst`, or added into it as
  /// elements of `*add` (whole elements only; reduce.hpp); how many (0: none yet). An error
  /// when closed.
  virtual expected<uint64_t> try_read(void* dst, uint64_t n, std::optional<dtype> add) = 0;
  /// Sleeps until the incoming stream has bytes (`for_data`) or the outgoing one room, or
  /// `wait` passes; an error when the channel is closed or the peer process is gone.
  virtual status wait(bool for_data, std::chrono::microseconds wait) = 0;
  /// Fails when the channel is closed or the peer process is gone (memory channels; a
  /// socket's end shows in its next read).
  virtual status alive() const { return {}; }
  /// A descriptor that poll() reports ready for both directions (a socket), or -1 (memory:
  /// polled, then wait()).
  virtual int poll_fd() const { return -1; }
  /// The most bytes one try_write or try_read should move, 0: the ring pass's own piece
  /// (MONKEY_DP_PIECE_KB, cache-sized). TCP takes larger ones: each system call and each
  /// loopback segment costs far more than a copy (docs/dataplane.md, Measured).
  virtual uint64_t piece_bytes() const { return 0; }
};

class channel {
public:
  virtual ~channel() = default;
  /// Whether the next frame starts within `wait` (false: not yet); an error when the peer is
  /// gone (closed, died).
  virtual expected<bool> wait_readable(std::chrono::milliseconds wait) = 0;
  /// The next frame's header (refused when corrupt or over `max_bytes`).
  virtual expected<frame_header> recv_header(uint64_t max_bytes) = 0;
  /// The payload of the header just received (h.bytes) into `dst`.
  virtual status recv_payload(void* dst, uint64_t bytes) = 0;
  /// The payload (elements of `t`, a type that reduces) added into `dst`:
  /// d[k] = d[k] + frame[k]. By default read in pieces into a small buffer; a ring adds
  /// straight from its memory.
  virtual status recv_payload_add(dtype t, void* dst, uint64_t bytes);
  /// One frame: `h` and h.bytes of `payload`.
  virtual status send(const frame_header& h, const void* payload) = 0;
  /// The frame when it goes out without waiting (room in a ring); false: nothing was written.
  virtual bool try_send(const frame_header&, const void*) { return false; }
  /// Wakes every call blocked on the channel (they fail); the peer sees the channel closed.
  virtual void shutdown() = 0;
  /// How long a wait on a memory channel polls before it sleeps (futex.hpp, poll_rounds).
  virtual void set_poll_rounds(int) {}
  /// "tcp", "shm" or "local".
  virtual const char* kind() const = 0;
  /// The collective lane (shm, local), or nullptr (tcp): both ends of a channel agree.
  virtual class lane* collective_lane() { return nullptr; }
};

/// A channel over a keyed TCP connection; `timeout`: how long a started transfer may make no
/// progress.
std::unique_ptr<channel> make_tcp_channel(class tcp_link link);
/// The same with a collective lane over a second connection of the pair (`lane`).
std::unique_ptr<channel> make_tcp_channel(class tcp_link link, class tcp_link lane);

/// Marks the rank a dialer asks for when it dials the pair's collective lane (the key proof
/// covers it).
constexpr uint32_t lane_bit = 0x40000000u;

/// The bytes of each direction of a ring channel's collective lane: `ring` (the channel's own
/// rings) capped at 1 MB (MONKEY_DP_LANE_KB overrides), so that the lane stays in the cache.
uint64_t lane_capacity(uint64_t ring);

/// Two channels joined in this process's memory (ranks of one host), rings of `capacity`
/// bytes each way (and lanes of lane_capacity); `timeout` as for shm.
std::pair<std::unique_ptr<channel>, std::unique_ptr<channel>>
make_local_pair(uint64_t capacity, std::chrono::milliseconds timeout);

/// What this process sees of a peer process's memory on the same machine: its shared arena as
/// mapped here (arena.hpp), or none; and whether either reads the other's memory with one
/// kernel copy (CMA: process_vm_readv, for sends by address; frame.hpp, frame_by_addr). Each
/// side proves it at set-up by reading a word the other shows it (the kernel allows it to a
/// process of the same user that may trace the other: Yama's ptrace_scope 0, the same pid
/// namespace, no seccomp filter against it); MONKEY_DP_CMA=0 turns it off.
struct peer_memory {
  std::shared_ptr<uint8_t> base;
  uint64_t bytes = 0;
  int32_t read_pid = 0;  ///< the peer's process id, when this process can read its memory; else 0
  bool reads_me = false; ///< the peer can read this process's memory
};

/// A listening Unix socket in the abstract namespace (no file): the shm transport's door.
class unix_listener {
public:
  unix_listener() = default;
  unix_listener(unix_listener&& other) noexcept;
  unix_listener& operator=(unix_listener&& other) noexcept;
  unix_listener(const unix_listener&) = delete;
  unix_listener& operator=(const unix_listener&) = delete;
  ~unix_listener();

  static expected<unix_listener> listen();
  /// The abstract name (without the leading NUL) the others dial.
  const std::string& name() const { return name_; }
  int fd() const { return fd_; }
  /// Accepts the next connection, checks its key proof and answers with a new shared segment
  /// of two rings of `capacity` bytes. The channel, the dialer's rank and the rank it asked for.
  /// `arena_fd` (-1: none): this process's shared arena (arena.hpp), handed over for the
  /// dialer's; each maps the other's when both have one.
  struct accepted {
    std::unique_ptr<channel> ch;
    uint32_t from = 0, to = 0;
    peer_memory arena; ///< the dialer's arena, mapped (empty: none), and CMA both ways
  };
  expected<accepted> accept(const std::string& key, uint64_t capacity,
                            std::chrono::milliseconds timeout, int arena_fd = -1);

private:
  int fd_ = -1;
  std::string name_;
};

/// Dials the Unix socket `name` as rank `from` asking for rank `to`, proves `key` and maps the
/// segment the listener hands over; then the two swap arenas (`arena_fd`, -1: none; the
/// listener's lands in `*arena` when both have one) and try CMA both ways (peer_memory).
/// `connect_timeout` bounds the connection and the proof, `timeout` the channel's transfers.
expected<std::unique_ptr<channel>> dial_shm(const std::string& name, const std::string& key,
                                            uint32_t from, uint32_t to,
                                            std::chrono::milliseconds connect_timeout,
                                            std::chrono::milliseconds timeout,
                                            int arena_fd = -1, peer_memory* arena = nullptr);

} // namespace monkey::dp
