// SPDX-License-Identifier: Apache-2.0
// Point-to-point sends (comm.hpp): a frame written from the calling thread when it fits at
// once, else queued for the peer's sending thread; a registered tensor to a rank that maps
// this process's arena goes by reference (frame.hpp, frame_by_ref), and another large one to
// a rank that reads this process's memory by address (frame_by_addr), each completed by the
// receiver's acknowledgement.
#include <cstdlib>
#include <cstring>
#include <optional>

#include "runtime/dataplane/arena.hpp"
#include "runtime/dataplane/cma.hpp"
#include "runtime/dataplane/comm_peer.hpp"

namespace monkey::dp {

static_assert(communicator::same_process == cma::same_process, "one value names this process");

void communicator::send(int32_t to, uint32_t tag, buffer buf, completion done) {
  if (to == rank_)
    return send_self(tag, std::move(buf), std::move(done));
  if (to < 0 || to >= world_ || to == rank_ || !peers_[static_cast<size_t>(to)]) {
    done(failure{"data plane: rank " + std::to_string(rank_) + " cannot send to rank "
                 + std::to_string(to) + " (world of " + std::to_string(world_) + ")"},
         {});
    return;
  }
  auto& p = *peers_[static_cast<size_t>(to)];
  auto off = ref_offset(to, buf);
  const bool addr = off == not_registered && by_address(to, buf);
  if (off == not_registered && !addr)
    return put_frame(p, make_header(buf.type(), static_cast<uint32_t>(rank_), tag, buf.count()),
                     std::move(buf), std::move(done));
  // By reference: the receiver copies the tensor from this process's arena (by address: from
  // its memory), and its acknowledgement completes the send.
  if (addr)
    off = reinterpret_cast<uint64_t>(buf.data());
  auto h = make_ref_header(buf.type(), static_cast<uint32_t>(rank_), tag, buf.count(),
                           addr ? frame_by_addr : frame_by_ref);
  auto ref = buffer(dtype::u8, ref_payload_bytes);
  std::string broken;
  {
    std::lock_guard<std::mutex> guard{p.m};
    broken = p.broken;
    if (broken.empty()) {
      uint64_t words[2] = {off, p.next_ref++};
      std::memcpy(ref.data(), words, sizeof(words));
      p.refs.emplace(words[1], peer::by_ref{std::move(buf), std::move(done), clock::now()});
    }
  }
  if (!broken.empty()) // (completions run outside the peer's lock: they may call back)
    return done(failure{broken}, {});
  ++(addr ? by_addr_sends_ : by_ref_sends_);
  put_frame(p, h, std::move(ref), nullptr);
}

void communicator::set_peer_cma(int32_t peer, int32_t read_pid, bool reads_me) {
  if (peer >= 0 && peer < world_)
    peer_cma_[static_cast<size_t>(peer)] = cma_view{read_pid, reads_me};
}

bool communicator::single_copy(int32_t peer) const {
  if (peer < 0 || peer >= world_)
    return false;
  auto& v = peer_cma_[static_cast<size_t>(peer)];
  return v.read_pid != 0 && v.reads_me;
}

bool communicator::by_address(int32_t to, const buffer& buf) const {
  // From 64 KB (smaller: a frame through the ring is as fast) to 32 MB: larger tensors move
  // faster through the ring, where both processes copy at once (two cores against one; 64 MB
  // here: 1.15 of memcpy against 0.73, docs/dataplane.md).
  static const uint64_t min_bytes = [] {
    auto* v = std::getenv("MONKEY_DP_CMA_KB");
    return (v ? std::strtoull(v, nullptr, 10) : 64) << 10;
  }();
  return peer_cma_[static_cast<size_t>(to)].reads_me && buf.bytes() >= min_bytes
         && buf.bytes() <= cma::max_bytes();
}

status communicator::read_by_addr(peer& p, const frame_header& h, uint64_t addr, void* into,
                                  bool add) {
  const auto pid = peer_cma_[static_cast<size_t>(p.rank)].read_pid;
  auto ok = add ? cma::add(pid, addr, h.type, into, h.count, p.scratch)
                : cma::read(pid, addr, into, h.data_bytes());
  if (!ok)
    return failure{"data plane: reading the tensor rank " + std::to_string(p.rank)
                   + " sent by address (tag " + std::to_string(h.tag) + ", "
                   + std::to_string(h.data_bytes()) + " bytes) from its memory: " + ok.error()};
  return {};
}


uint64_t communicator::ref_offset(int32_t to, const buffer& buf) const {
  static const uint64_t min_bytes = [] {
    auto* v = std::getenv("MONKEY_DP_REF_KB");
    return (v ? std::strtoull(v, nullptr, 10) : 64) << 10;
  }();
  if (!arena_ || buf.bytes() < min_bytes || !peer_arenas_[static_cast<size_t>(to)].base)
    return not_registered;
  return arena_->offset_of(buf.data(), buf.bytes());
}

expected<const uint8_t*> communicator::resolve_ref(peer& p, const frame_header& h, uint64_t& id) {
  uint64_t words[2] = {0, 0};
  if (auto ok = p.ch->recv_payload(words, sizeof(words)); !ok)
    return failure{ok.error() + " (from rank " + std::to_string(p.rank) + ")"};
  id = words[1];
  if (h.flags == frame_by_addr) {
    if (peer_cma_[static_cast<size_t>(p.rank)].read_pid == 0)
      return failure{"data plane: rank " + std::to_string(p.rank) + " sent a tensor by address "
                     "(tag " + std::to_string(h.tag) + "), but its memory cannot be read here"};
    return reinterpret_cast<const uint8_t*>(words[0]);
  }
  auto& a = peer_arenas_[static_cast<size_t>(p.rank)];
  if (!a.base)
    return failure{"data plane: rank " + std::to_string(p.rank) + " sent a tensor by reference "
                   "(tag " + std::to_string(h.tag) + "), but its arena is not mapped here"};
  if (words[0] > a.bytes || h.data_bytes() > a.bytes - words[0])
    return failure{"data plane: rank " + std::to_string(p.rank) + " sent a tensor by reference "
                   "(tag " + std::to_string(h.tag) + ") outside its arena"};
  return a.base.get() + words[0];
}

void communicator::ack_ref(peer& p, uint32_t tag, uint64_t id) {
  auto b = buffer(dtype::u8, 8);
  std::memcpy(b.data(), &id, sizeof(id));
  put_frame(p, make_ack_header(static_cast<uint32_t>(rank_), tag), std::move(b), nullptr,
            true);
}

status communicator::take_ack(peer& p, const frame_header& h) {
  uint64_t id = 0;
  if (auto ok = p.ch->recv_payload(&id, sizeof(id)); !ok)
    return failure{ok.error() + " (from rank " + std::to_string(p.rank) + ")"};
  std::optional<peer::by_ref> r;
  {
    std::lock_guard<std::mutex> guard{p.m};
    auto it = p.refs.find(id);
    if (it != p.refs.end()) {
      r = std::move(it->second);
      p.refs.erase(it);
    }
    p.last_frame = clock::now();
  }
  if (!r)
    return failure{"data plane: rank " + std::to_string(p.rank) + " acknowledged a tensor under "
                   "tag " + std::to_string(h.tag) + " that was not sent to it by reference"};
  if (r->done)
    r->done({}, {});
  return {};
}

void communicator::put_frame(peer& p, const frame_header& h, buffer buf, completion done,
                             bool first) {
  {
    std::unique_lock<std::mutex> lock{p.m};
    if (p.broken.empty() && p.sends.empty() && !p.sending) {
      // Nothing queued: a frame the channel takes at once (small, with room in a ring) goes
      // out from this thread, without waking the sending one.
      p.sending = true;
      lock.unlock();
      auto sent = p.ch->try_send(h, buf.data());
      lock.lock();
      p.sending = false;
      p.cv.notify_all();
      if (sent) {
        lock.unlock();
        if (done)
          done({}, {});
        return;
      }
    }
    if (p.broken.empty()) {
      if (first)
        p.sends.push_front(pending_send{h, std::move(buf), std::move(done)});
      else
        p.sends.push_back(pending_send{h, std::move(buf), std::move(done)});
      p.cv.notify_all();
      return;
    }
  }
  if (done)
    done(failure{p.broken}, {});
}

} // namespace monkey::dp
