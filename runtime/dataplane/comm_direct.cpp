// SPDX-License-Identifier: Apache-2.0
// The all-reduce in place (arena.hpp; docs/dataplane.md, "Registered buffers"): the members
// of a group on one machine read each other's tensors where they lie, in the arenas they
// map or, for tensors outside them, by CMA (cma.hpp: one kernel copy from the member's
// process).
//
// Each member publishes in its call slot the call's tag and where its buffer lies (stage 1:
// its arena offset or not_registered, its address, whether it goes on here and whether it
// reads every other member's memory), and, when it goes on, waits for every other member's
// slot of the same call. Every member decides alike from the same slots: in place when each
// goes on, and every tensor is registered or every member reads the others' memory; else
// every member takes the ring (one that cannot go on takes it at once). Then member i
//   - sums chunk i of every member's tensor into its own, in the ring's order (chunk c from
//     member c + 1 onwards: the same additions as the ring, bit for bit), divides it for a
//     mean, and says so (stage 2);
//   - copies each other member's finished chunk from that member's tensor once it says so,
//     then adds one to every other member's readers_done (it reads their tensors no more);
//   - says so (stage 3), and returns when its own readers_done counts every other member
//     (nobody reads its tensor any more; the count is reset on entry, before stage 1 shows).
// While it waits it checks that the members it still needs are alive: the one whose stage it
// waits for, or, for its readers_done, those that have not reached stage 3 (a member that
// did may have returned and ended its process).
// A member's chunk is overwritten (stage 2 of the others) only after it was read: member c
// finishes chunk c only after it has read everyone's chunk c, and a member's own chunk c
// changes only when it copies c's finished one.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "runtime/dataplane/arena.hpp"
#include "runtime/dataplane/cma.hpp"
#include "runtime/dataplane/comm.hpp"
#include "runtime/dataplane/futex.hpp"

namespace monkey::dp {

namespace {

using clock = std::chrono::steady_clock;

uint64_t state_of(uint32_t tag, uint32_t stage) {
  return (uint64_t{tag} << 32) | stage;
}

bool reached(uint64_t state, uint32_t tag, uint32_t stage) {
  return (state >> 32) == tag && (state & 0xFFFFFFFFu) >= stage;
}

void publish(call_slot& s, uint32_t tag, uint32_t stage) {
  s.state.store(state_of(tag, stage), std::memory_order_release);
  notify(s.seq, s.waiters);
}

/// Where a member's tensor lies as seen from here: mapped (`at`), or at `addr` in process
/// `pid` (CMA; cma::same_process: this one).
struct source {
  const uint8_t* at = nullptr;
  int32_t pid = 0;
  uint64_t addr = 0;
  status read(uint64_t off, void* dst, uint64_t n) const {
    if (!at)
      return cma::read(pid, addr + off, dst, n);
    std::memcpy(dst, at + off, n);
    return {};
  }
  status add(uint64_t off, dtype t, void* dst, uint64_t count,
             std::vector<uint8_t>& scratch) const {
    if (!at)
      return cma::add(pid, addr + off, t, dst, count, scratch);
    add_elems(t, dst, at + off, count);
    return {};
  }
};

} // namespace

void communicator::use_arena(std::shared_ptr<arena> own) {
  arena_ = std::move(own);
}

void communicator::set_peer_arena(int32_t peer, std::shared_ptr<uint8_t> base,
                                  uint64_t bytes) {
  if (peer >= 0 && peer < world_)
    peer_arenas_[static_cast<size_t>(peer)] = mapped_arena{std::move(base), bytes};
}

buffer communicator::alloc(dtype t, uint64_t count) {
  if (arena_)
    if (auto b = arena_->alloc(t, count))
      return std::move(*b);
  return buffer(t, count);
}

bool communicator::registered(const buffer& b) const {
  return arena_ && !b.empty() && arena_->offset_of(b.data(), b.bytes()) != not_registered;
}

expected<bool> communicator::direct_allreduce(buffer buf, reduce_op op,
                                              const std::vector<int32_t>& g, int i,
                                              uint32_t tag) {
  const int n = static_cast<int>(g.size());
  if (n < 2 || !arena_ || !arena_->slot(rank_))
    return false;
  // Every member's arena must be mapped here (the slots live there). A member that cannot go
  // on here says so in its slot all the same (no slot_direct): a peer that mapped its arena
  // waits for that slot. Tensors outside the arenas are read by CMA, when every member reads
  // every other's memory.
  std::vector<uint8_t*> bases(static_cast<size_t>(n));
  bool mapped = true, cma_all = true;
  for (int k = 0; k < n; ++k) {
    auto r = g[static_cast<size_t>(k)];
    if (r == rank_) {
      bases[static_cast<size_t>(k)] = arena_->base();
      continue;
    }
    auto& a = peer_arenas_[static_cast<size_t>(r)];
    if (!a.base || r >= max_slot_ranks)
      mapped = false;
    else
      bases[static_cast<size_t>(k)] = a.base.get();
    cma_all = cma_all && peer_cma_[static_cast<size_t>(r)].read_pid != 0;
  }
  cma_all = cma_all && buf.bytes() <= cma::max_bytes();
  uint64_t group = 14695981039346656037ull; // FNV-1a over the members in ring order
  for (auto r : g)
    for (int b = 0; b < 4; ++b)
      group = (group ^ ((static_cast<uint32_t>(r) >> (8 * b)) & 0xFF)) * 1099511628211ull;
  auto& mine = *arena_->slot(rank_);
  const uint64_t bytes = buf.bytes();
  auto offset = buf.empty() ? not_registered : arena_->offset_of(buf.data(), bytes);
  const bool direct = mapped && !buf.empty() && (offset != not_registered || cma_all);
  mine.offset = offset;
  mine.address = reinterpret_cast<uint64_t>(buf.data());
  mine.count = buf.count();
  mine.type = static_cast<uint16_t>(buf.type());
  mine.flags = static_cast<uint16_t>((direct ? slot_direct : 0) | (cma_all ? slot_cma : 0));
  mine.readers_done.store(uint64_t{tag} << 32, std::memory_order_relaxed);
  mine.group.store(group, std::memory_order_relaxed);
  publish(mine, tag, 1);
  if (!direct)
    return false; // (the others see it and take the ring too)

  // How long a waiter polls before it sleeps (futex.hpp): with 2000 rounds 4 of 20 runs of
  // 2 ranks took 900 us, not 350; crowded, 200 (4 ranks on 2 cores ran 1.1x faster than
  // with 2000).
  const int spin_rounds = poll_rounds(n, 200);
  auto slot_of = [&](int k) { return slot_at(bases[static_cast<size_t>(k)], g[static_cast<size_t>(k)]); };
  // Waits until `ready()`, watching slot `s`'s futex: spins, then sleeps; fails when a member
  // it still needs (`needed(k)`) is gone, or nothing happened for the transfer timeout (`what`
  // names what was awaited). A member that finished its part may have ended its process.
  auto wait_until = [&](call_slot* s, auto ready, const std::string& what,
                        auto needed) -> status {
    for (int spin = 0; spin < spin_rounds; ++spin) {
      if (ready())
        return {};
      cpu_pause();
    }
    auto since = clock::now();
    for (;;) {
      auto seen = s->seq.load(std::memory_order_seq_cst);
      s->waiters.fetch_add(1, std::memory_order_seq_cst);
      bool now = ready();
      if (!now) // 1 ms: every change wakes; the nap bounds the checks below
        futex_wait(&s->seq, seen, std::chrono::microseconds(1000));
      s->waiters.fetch_sub(1, std::memory_order_seq_cst);
      if (now || ready())
        return {};
      for (int k = 0; k < n; ++k)
        if (k != i && needed(k))
          if (auto ok = peer_alive(g[static_cast<size_t>(k)]); !ok)
            return ok;
      if (clock::now() - since > opts_.timeout)
        return failure{"data plane: " + what + " within "
                       + std::to_string(opts_.timeout.count())
                       + " ms: timed out (is a member frozen, or calling other collectives?)"};
    }
  };
  auto wait_stage = [&](int k, uint32_t stage) {
    auto* s = slot_of(k);
    return wait_until(
      s,
      [&] {
        return reached(s->state.load(std::memory_order_acquire), tag, stage)
               && s->group.load(std::memory_order_relaxed) == group;
      },
      "rank " + std::to_string(g[static_cast<size_t>(k)]) + " did not "
        + (stage == 1 ? "enter" : "finish its chunk of") + " the all-reduce (tag "
        + std::to_string(tag) + ")",
      // (a member it waits on fails its call when one it needs is gone, and its failure
      // closes its links to the group)
      [k](int m) { return m == k; });
  };

  // Where each member's tensor lies: in its arena as mapped here, or (not registered) at its
  // address in its process, read by CMA. Every member decides alike from the same slots: in
  // place when every one goes on (slot_direct) and every tensor is registered or every
  // member reads the others' memory.
  std::vector<source> at(static_cast<size_t>(n));
  bool all_registered = offset != not_registered, all_cma = cma_all;
  for (int k = 0; k < n; ++k) {
    if (k == i) {
      at[static_cast<size_t>(k)].at = static_cast<uint8_t*>(buf.data());
      continue;
    }
    if (auto ok = wait_stage(k, 1); !ok)
      return failure{ok.error()};
    auto* s = slot_of(k);
    auto r = g[static_cast<size_t>(k)];
    if (s->count != buf.count() || s->type != static_cast<uint16_t>(buf.type()))
      return failure{"data plane: rank " + std::to_string(r) + " all-reduces "
                     + std::to_string(s->count) + " elements of "
                     + to_string(static_cast<dtype>(s->type)) + " where this one does "
                     + std::to_string(buf.count()) + " of " + to_string(buf.type())
                     + ": every member must call the same collectives in the same order"};
    if (!(s->flags & slot_direct))
      return false;
    all_cma = all_cma && (s->flags & slot_cma);
    auto& src = at[static_cast<size_t>(k)];
    if (s->offset == not_registered) {
      all_registered = false;
      src.pid = peer_cma_[static_cast<size_t>(r)].read_pid;
      src.addr = s->address;
      continue;
    }
    auto limit = peer_arenas_[static_cast<size_t>(r)].bytes;
    if (s->offset < arena_slot_bytes || s->offset > limit || bytes > limit - s->offset)
      return failure{"data plane: rank " + std::to_string(r)
                     + " names a buffer outside its arena"};
    src.at = bases[static_cast<size_t>(k)] + s->offset;
  }
  if (!all_registered && !all_cma)
    return false;
  auto read_failed = [&](int k, const status& why) {
    return failure{"data plane: reading rank " + std::to_string(g[static_cast<size_t>(k)])
                   + "'s tensor in the all-reduce (tag " + std::to_string(tag) + "): "
                   + why.error()};
  };

  // Chunk i: the others' in the ring's order from member i + 1, then this member's.
  const auto t = buf.type();
  const uint64_t esz = dtype_size(t);
  auto c = ring_chunk(buf.count(), n, i);
  auto* own = static_cast<uint8_t*>(buf.data()) + c.first * esz;
  std::vector<uint8_t> scratch;
  if (n == 2) {
    int k = (i + 1) % n;
    if (auto ok = at[static_cast<size_t>(k)].add(c.first * esz, t, own, c.count, scratch); !ok)
      return read_failed(k, ok);
  } else {
    const uint64_t piece = std::max<uint64_t>((32 << 10) / esz, 1);
    std::vector<uint64_t> acc_mem((piece * esz + 7) / 8);
    auto* acc = reinterpret_cast<uint8_t*>(acc_mem.data());
    for (uint64_t o = 0; o < c.count; o += piece) {
      auto len = std::min(piece, c.count - o);
      auto from = (c.first + o) * esz;
      int k = (i + 1) % n;
      if (auto ok = at[static_cast<size_t>(k)].read(from, acc, len * esz); !ok)
        return read_failed(k, ok);
      for (int d = 2; d < n; ++d) {
        k = (i + d) % n;
        if (auto ok = at[static_cast<size_t>(k)].add(from, t, acc, len, scratch); !ok)
          return read_failed(k, ok);
      }
      add_elems(t, own + o * esz, acc, len);
    }
  }
  if (op == reduce_op::mean)
    divide_elems(t, own, c.count, n);
  publish(mine, tag, 2);

  // Every other member's finished chunk; then it no longer reads their tensors.
  for (int d = 1; d < n; ++d) {
    int k = (i + d) % n;
    if (auto ok = wait_stage(k, 2); !ok)
      return failure{ok.error()};
    auto ck = ring_chunk(buf.count(), n, k);
    if (ck.count > 0)
      if (auto ok = at[static_cast<size_t>(k)].read(
            ck.first * esz, static_cast<uint8_t*>(buf.data()) + ck.first * esz, ck.count * esz);
          !ok)
        return read_failed(k, ok);
  }
  for (int d = 1; d < n; ++d) {
    auto* s = slot_of((i + d) % n);
    auto v = s->readers_done.load(std::memory_order_relaxed);
    while ((v >> 32) == tag
           && !s->readers_done.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel))
      ;
    notify(s->seq, s->waiters);
  }
  // Stage 3: this member reads no tensor any more (it counted in every other's readers_done);
  // its process may end once the others finished reading its tensor.
  publish(mine, tag, 3);
  const auto others = static_cast<uint32_t>(n - 1);
  if (auto ok = wait_until(
        &mine,
        [&] { return (mine.readers_done.load(std::memory_order_acquire) & 0xFFFFFFFFu) >= others; },
        "the other members did not finish reading this rank's tensor in the all-reduce (tag "
          + std::to_string(tag) + ")",
        [&](int k) {
          auto* s = slot_of(k);
          return !(reached(s->state.load(std::memory_order_acquire), tag, 3)
                   && s->group.load(std::memory_order_relaxed) == group);
        });
      !ok)
    return failure{ok.error()};
  in_place_.fetch_add(1);
  return true;
}

} // namespace monkey::dp
