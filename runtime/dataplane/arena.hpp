// SPDX-License-Identifier: Apache-2.0
#pragma once
// Registered buffers (docs/dataplane.md, "Registered buffers"): one shared memory arena per
// app host process, a memfd that the host's shm peers map at connect. A buffer allocated in
// it (communicator::alloc) is readable by every rank on the machine, so an all-reduce over
// ranks that all pass registered buffers reads the others' tensors where they lie: one pass
// over memory instead of a copy into a ring and a copy out (what MPI's single-copy CMA path
// and NCCL's user buffer registration buy).
//
// Layout: [the call slots: one per rank below max_slot_ranks][the buffers]. A rank's slot is
// written by that rank only and read by its peers: which collective it is in, where its
// buffer lies, how far it went. Plain C++ (no CAF).

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "monkey/sdk/tensor.hpp"
#include "runtime/expected.hpp"

namespace monkey::dp {

/// Ranks above this have no slot (their all-reduces take the ring).
constexpr int32_t max_slot_ranks = 256;

/// A rank's progress through its current all-reduce, in its own process's arena.
struct alignas(64) call_slot {
  /// (tag << 32) | stage: 1 entered (offset, count, type valid), 2 its chunk reduced, 3 it
  /// reads no other member's tensor any more.
  std::atomic<uint64_t> state{0};
  /// The group's members in ring order, hashed: two groups' calls may share a tag.
  std::atomic<uint64_t> group{0};
  uint64_t offset = 0; ///< the buffer's bytes into the arena; not_registered: not in it
  uint64_t count = 0;
  uint16_t type = 0;
  uint16_t flags = 0;               ///< slot_direct, slot_cma
  std::atomic<uint32_t> seq{0};     ///< bumped on every change (a futex word)
  std::atomic<uint32_t> waiters{0}; ///< members asleep on seq (a change wakes them only then)
  /// (tag << 32) | the other members that finished reading this rank's buffer in the call
  /// of that tag: they add to it while it names their call (the one field others write; a
  /// member of a failed call that wakes late counts in no other call).
  std::atomic<uint64_t> readers_done{0};
  uint64_t address = 0; ///< the buffer's address in its process (read by CMA when not in the arena)
};
/// The member goes on in place when the others can (it maps every member's arena, and its
/// buffer is registered or it reads every member's memory); without it, every member takes
/// the ring.
constexpr uint16_t slot_direct = 1;
/// The member reads every other member's memory (CMA: transport.hpp, peer_memory).
constexpr uint16_t slot_cma = 2;
static_assert(sizeof(call_slot) == 64, "a call slot is one cache line");
constexpr uint64_t not_registered = ~uint64_t{0};

class arena : public std::enable_shared_from_this<arena> {
public:
  /// A new arena of `bytes` (address space: pages are committed as buffers touch them), or
  /// why not.
  static expected<std::shared_ptr<arena>> create(uint64_t bytes);
  /// The size MONKEY_DP_ARENA_MB asks for (default 1024 MB; 0: no arena).
  static uint64_t configured_bytes();
  ~arena();
  arena(const arena&) = delete;
  arena& operator=(const arena&) = delete;

  /// `count` zeroed elements of `t` in the arena (64-byte aligned), or why not (full).
  expected<buffer> alloc(dtype t, uint64_t count);
  /// The offset of [p, p + bytes) in the arena, or not_registered.
  uint64_t offset_of(const void* p, uint64_t bytes) const;

  uint8_t* base() const { return base_; }
  uint64_t bytes() const { return bytes_; }
  int fd() const { return fd_; }
  call_slot* slot(int32_t rank) const;

private:
  arena() = default;
  void release(uint64_t offset, uint64_t bytes);

  int fd_ = -1;
  uint8_t* base_ = nullptr;
  uint64_t bytes_ = 0;
  std::mutex m_;
  std::map<uint64_t, uint64_t> free_; ///< offset → bytes, coalesced
};

/// The slots' bytes ahead of the buffers.
constexpr uint64_t arena_slot_bytes = max_slot_ranks * sizeof(call_slot);

/// A peer process's arena, mapped from the descriptor it handed over (sealed against
/// shrinking, checked), or why not. Only its slots' readers_done and waiters are written
/// through it.
expected<std::shared_ptr<uint8_t>> map_peer_arena(int fd, uint64_t& bytes);

/// The slot of `rank` in an arena mapped at `base`.
inline call_slot* slot_at(uint8_t* base, int32_t rank) {
  return reinterpret_cast<call_slot*>(base) + rank;
}

} // namespace monkey::dp
