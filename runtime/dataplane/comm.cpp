// SPDX-License-Identifier: Apache-2.0
#include "runtime/dataplane/comm.hpp"
#include "runtime/dataplane/comm_peer.hpp"
#include "runtime/dataplane/futex.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <future>
#include <optional>
#include <poll.h>
#include <set>

namespace monkey::dp {

// ---- the communicator ----------------------------------------------------------------------------


communicator::communicator(int32_t rank, int32_t world, comm_options opts)
  : rank_(rank), world_(world), opts_(opts) {
  peers_.resize(static_cast<size_t>(world));
  peer_arenas_.resize(static_cast<size_t>(world));
  peer_cma_.resize(static_cast<size_t>(world));
}

status communicator::peer_alive(int32_t r) {
  auto& p = *peers_[static_cast<size_t>(r)];
  {
    std::lock_guard<std::mutex> guard{p.m};
    if (!p.broken.empty())
      return failure{p.broken};
  }
  if (auto* l = p.ch->collective_lane())
    if (auto ok = l->alive(); !ok)
      return failure{ok.error() + " (rank " + std::to_string(r) + ")"};
  return {};
}

status communicator::alive(int32_t r) {
  if (r < 0 || r >= world_)
    return failure{"data plane: no rank " + std::to_string(r) + " (world " + std::to_string(world_)
                   + ")"};
  if (r == rank_ || !peers_[static_cast<size_t>(r)])
    return {};
  return peer_alive(r);
}

communicator::~communicator() {
  close();
}

void communicator::attach(int32_t peer_rank, std::unique_ptr<channel> ch) {
  auto p = std::make_unique<peer>();
  p->rank = peer_rank;
  p->ch = std::move(ch);
  peers_[static_cast<size_t>(peer_rank)] = std::move(p);
}

status communicator::start() {
  for (int32_t r = 0; r < world_; ++r)
    if (r != rank_ && !peers_[static_cast<size_t>(r)])
      return failure{"data plane: rank " + std::to_string(rank_) + " has no channel to rank "
                     + std::to_string(r)};
  // The ranks of this machine (memory channels) decide how long a wait polls (futex.hpp).
  int here = 1;
  for (auto& p : peers_)
    if (p && (std::string(p->ch->kind()) == "shm" || std::string(p->ch->kind()) == "local"))
      ++here;
  for (auto& p : peers_)
    if (p)
      p->ch->set_poll_rounds(poll_rounds(here, 2000));
  for (auto& p : peers_)
    if (p) {
      p->rx = std::thread([this, q = p.get()] { rx_loop(*q); });
      p->tx = std::thread([this, q = p.get()] { tx_loop(*q); });
    }
  coll_thread_ = std::thread([this] {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock{cmtx_};
        ccv_.wait(lock, [&] { return stopping_ || !collectives_.empty(); });
        if (collectives_.empty())
          return;
        job = std::move(collectives_.front());
        collectives_.pop_front();
      }
      job();
    }
  });
  started_ = true;
  return {};
}

void communicator::close() {
  {
    std::lock_guard<std::mutex> guard{cmtx_};
    if (stopping_)
      return;
    stopping_ = true;
  }
  for (auto& p : peers_)
    if (p) {
      {
        std::lock_guard<std::mutex> guard{p->m};
        p->stopping = true;
      }
      fail_peer(*p, "data plane: the communicator closed");
    }
  std::deque<pending_recv> mine;
  {
    std::lock_guard<std::mutex> guard{self_.m};
    self_.closed = true;
    mine.swap(self_.posted);
    self_.sent.clear();
  }
  for (auto& r : mine)
    r.done(failure{"data plane: the communicator closed"}, {});
  ccv_.notify_all();
  for (auto& p : peers_)
    if (p) {
      if (p->rx.joinable())
        p->rx.join();
      if (p->tx.joinable())
        p->tx.join();
    }
  if (coll_thread_.joinable())
    coll_thread_.join();
}

std::string communicator::transport(int32_t r) const {
  if (r < 0 || r >= world_ || r == rank_ || !peers_[static_cast<size_t>(r)])
    return "";
  return peers_[static_cast<size_t>(r)]->ch->kind();
}

void communicator::fail_peer(peer& p, const std::string& why) {
  std::deque<pending_send> sends;
  std::deque<pending_recv> posted;
  std::map<uint64_t, peer::by_ref> refs;
  {
    std::lock_guard<std::mutex> guard{p.m};
    if (p.broken.empty())
      p.broken = why;
    sends.swap(p.sends);
    posted.swap(p.posted);
    refs.swap(p.refs);
  }
  p.cv.notify_all();
  p.ch->shutdown();
  status bad{failure{p.broken}};
  for (auto& s : sends)
    if (s.done)
      s.done(bad, {});
  for (auto& r : posted)
    if (r.done)
      r.done(bad, {});
  for (auto& [id, r] : refs)
    if (r.done)
      r.done(bad, {});
}

void communicator::rx_loop(peer& p) {
  for (;;) {
    {
      std::lock_guard<std::mutex> guard{p.m};
      if (p.stopping || !p.broken.empty())
        return;
    }
    auto ready = p.ch->wait_readable(std::chrono::milliseconds(100));
    if (!ready) {
      fail_peer(p, ready.error() + " (rank " + std::to_string(p.rank) + ")");
      return;
    }
    if (!*ready) {
      bool late = false, uncopied = false;
      {
        std::lock_guard<std::mutex> guard{p.m};
        auto since = std::max(p.waiting_since, p.last_frame);
        late = !p.posted.empty() && clock::now() - since > opts_.timeout;
        for (auto& [id, r] : p.refs)
          uncopied = uncopied || clock::now() - std::max(r.since, p.last_frame) > opts_.timeout;
      }
      if (uncopied) {
        fail_peer(p, "data plane: rank " + std::to_string(p.rank) + " copied no tensor sent to "
                       "it by reference for " + std::to_string(opts_.timeout.count())
                       + " ms: timed out (is it frozen?)");
        return;
      }
      if (late) {
        fail_peer(p, "data plane: rank " + std::to_string(p.rank) + " sent nothing for "
                       + std::to_string(opts_.timeout.count())
                       + " ms while a receive waited on it: timed out (is it frozen?)");
        return;
      }
      continue;
    }
    auto h = p.ch->recv_header(opts_.max_frame_bytes);
    if (!h) {
      fail_peer(p, h.error() + " (from rank " + std::to_string(p.rank) + ")");
      return;
    }
    if (h->flags == frame_ref_ack) {
      if (auto ok = take_ack(p, *h); !ok) {
        fail_peer(p, ok.error());
        return;
      }
      continue;
    }
    // A tensor sent by reference: copied from where it lies in the sender's arena; by
    // address: read from the sender's memory.
    const uint8_t* by_ref = nullptr;
    uint64_t ref_id = 0, addr = 0;
    const bool by_addr = h->flags == frame_by_addr;
    if (h->flags == frame_by_ref || h->flags == frame_by_addr) {
      auto src = resolve_ref(p, *h, ref_id);
      if (!src) {
        fail_peer(p, src.error());
        return;
      }
      if (h->flags == frame_by_ref)
        by_ref = *src;
      else
        addr = reinterpret_cast<uint64_t>(*src);
    }
    std::optional<pending_recv> match;
    std::shared_ptr<peer::early> early;
    auto held_since = clock::now();
    {
      std::unique_lock<std::mutex> lock{p.m};
      for (;;) {
        for (auto it = p.posted.begin(); it != p.posted.end(); ++it)
          if (it->tag == h->tag) {
            match = std::move(*it);
            p.posted.erase(it);
            break;
          }
        if (match)
          break;
        // No receive for it yet: kept while the early frames stay within their bound (the
        // first always); else the frame waits here, and the sender behind it (flow control).
        auto kept = early_bytes_.load();
        if (kept == 0 || kept + h->data_bytes() <= opts_.max_early_bytes) {
          early_bytes_ += h->data_bytes();
          // Registered before its bytes are read: a receive posted meanwhile takes this
          // frame, not the next one under the same tag.
          early = std::make_shared<peer::early>();
          early->h = *h;
          p.unexpected[h->tag].push_back(early);
          break;
        }
        if (p.stopping || !p.broken.empty())
          return;
        if (clock::now() - held_since > opts_.timeout) {
          lock.unlock();
          fail_peer(p, "data plane: rank " + std::to_string(p.rank) + " sent a frame under tag "
                         + std::to_string(h->tag) + " (" + std::to_string(h->data_bytes())
                         + " bytes) that no receive asked for within "
                         + std::to_string(opts_.timeout.count()) + " ms while "
                         + std::to_string(kept) + " bytes of frames already waited for their "
                         "receives (the bound: " + std::to_string(opts_.max_early_bytes)
                         + " bytes, MONKEY_DP_EARLY_MB): does every send have its receive?");
          return;
        }
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        lock.lock();
      }
      p.last_frame = clock::now();
    }
    buffer into;
    bool fits = match && !match->into.empty() && match->into.type() == h->type
                && match->into.count() == h->count;
    bool added = fits && match->add;
    if (fits)
      into = match->into;
    else
      into = take_pooled(p, h->type, h->count);
    status ok;
    if (by_ref) {
      if (added)
        add_elems(h->type, into.data(), by_ref, h->count);
      else
        std::memcpy(into.data(), by_ref, h->data_bytes());
      ack_ref(p, h->tag, ref_id); // the sender may touch its tensor again
    } else if (by_addr) {
      ok = read_by_addr(p, *h, addr, into.data(), added);
      if (ok)
        ack_ref(p, h->tag, ref_id);
    } else {
      ok = added ? p.ch->recv_payload_add(h->type, into.data(), h->bytes)
                 : p.ch->recv_payload(into.data(), h->bytes);
    }
    if (added && ok) {
      if (match->done)
        match->done({}, std::move(into));
      continue;
    }
    if (early) {
      std::lock_guard<std::mutex> guard{p.m};
      if (ok) {
        early->data = into;
        early->complete = true;
      } else {
        // Its bytes failed: no later receive may take it (they get the link's failure).
        auto it = p.unexpected.find(h->tag);
        if (it != p.unexpected.end()) {
          auto at = std::find(it->second.begin(), it->second.end(), early);
          if (at != it->second.end()) {
            it->second.erase(at);
            early_bytes_ -= h->data_bytes();
            if (it->second.empty())
              p.unexpected.erase(it);
          }
        }
      }
      if (early->waiter)
        match = std::move(early->waiter);
    }
    if (!ok) {
      if (match && match->done)
        match->done(ok, {});
      fail_peer(p, ok.error() + " (from rank " + std::to_string(p.rank) + ")");
      return;
    }
    if (match)
      deliver(p, *h, std::move(*match), std::move(into));
  }
}

buffer communicator::take_pooled(peer& p, dtype t, uint64_t count) {
  {
    std::lock_guard<std::mutex> guard{p.m};
    auto it = p.pool.find({t, count});
    if (it != p.pool.end() && !it->second.empty()) {
      auto b = std::move(it->second.back());
      it->second.pop_back();
      p.pooled_bytes -= b.bytes();
      return b;
    }
  }
  return buffer(t, count);
}

void communicator::give_back(peer& p, buffer b) {
  constexpr uint64_t pool_limit = uint64_t{512} << 20;
  std::lock_guard<std::mutex> guard{p.m};
  if (p.pooled_bytes + b.bytes() > pool_limit)
    return;
  p.pooled_bytes += b.bytes();
  p.pool[{b.type(), b.count()}].push_back(std::move(b));
}

void communicator::deliver(peer& p, const frame_header& h, pending_recv r, buffer data) {
  auto from = p.rank;
  if (!r.done)
    return;
  if (r.into.empty())
    return r.done({}, std::move(data));
  if (r.into.type() != h.type || r.into.count() != h.count)
    return r.done(failure{"data plane: rank " + std::to_string(from) + " sent "
                          + std::to_string(h.count) + " " + to_string(h.type)
                          + " elements under tag " + std::to_string(h.tag)
                          + "; the receive expected " + std::to_string(r.into.count()) + " "
                          + to_string(r.into.type())},
                  {});
  if (r.into.data() != data.data()) {
    if (r.add)
      add_elems(h.type, r.into.data(), data.data(), h.count);
    else
      std::memcpy(r.into.data(), data.data(), h.data_bytes());
    give_back(p, std::move(data));
  }
  r.done({}, std::move(r.into));
}

void communicator::tx_loop(peer& p) {
  for (;;) {
    pending_send s;
    {
      std::unique_lock<std::mutex> lock{p.m};
      p.cv.wait(lock, [&] {
        return p.stopping || !p.broken.empty() || (!p.sends.empty() && !p.sending);
      });
      if (p.stopping || !p.broken.empty())
        return;
      s = std::move(p.sends.front());
      p.sends.pop_front();
      p.sending = true;
    }
    auto ok = p.ch->send(s.h, s.buf.data());
    {
      std::lock_guard<std::mutex> guard{p.m};
      p.sending = false;
    }
    p.cv.notify_all(); // a collective waiting its turn (send_direct)
    if (!ok) {
      auto why = ok.error() + " (to rank " + std::to_string(p.rank) + ")";
      if (s.done)
        s.done(failure{why}, {});
      fail_peer(p, why);
      return;
    }
    if (s.done)
      s.done({}, {});
  }
}

void communicator::recv(int32_t from, uint32_t tag, buffer into, completion done) {
  post_recv(from, pending_recv{tag, std::move(into), std::move(done)});
}

void communicator::post_recv(int32_t from, pending_recv r) {
  if (from == rank_ && !r.add)
    return recv_self(std::move(r));
  if (from < 0 || from >= world_ || from == rank_ || !peers_[static_cast<size_t>(from)]) {
    r.done(failure{"data plane: rank " + std::to_string(rank_) + " cannot receive from rank "
                   + std::to_string(from) + " (world of " + std::to_string(world_) + ")"},
           {});
    return;
  }
  auto& p = *peers_[static_cast<size_t>(from)];
  std::shared_ptr<peer::early> early;
  std::string broken;
  {
    std::lock_guard<std::mutex> guard{p.m};
    auto it = p.unexpected.find(r.tag);
    if (it != p.unexpected.end() && !it->second.empty()) {
      early = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty())
        p.unexpected.erase(it);
      early_bytes_ -= early->h.data_bytes(); // taken: no longer early
      if (!early->complete) {
        // Its bytes are still being read: the receiving thread delivers it.
        early->waiter = std::move(r);
        return;
      }
    } else if (!p.broken.empty()) {
      broken = p.broken;
    } else {
      if (p.posted.empty())
        p.waiting_since = clock::now();
      p.posted.push_back(std::move(r));
      return;
    }
  }
  if (!broken.empty())
    return r.done(failure{broken}, {});
  deliver(p, early->h, std::move(r), early->data);
}

status communicator::send_direct(int32_t to, uint32_t tag, const buffer& b) {
  auto& p = *peers_[static_cast<size_t>(to)];
  auto h = make_header(b.type(), static_cast<uint32_t>(rank_), tag, b.count());
  {
    std::unique_lock<std::mutex> lock{p.m};
    p.cv.wait(lock, [&] { return !p.broken.empty() || (p.sends.empty() && !p.sending); });
    if (!p.broken.empty())
      return failure{p.broken};
    p.sending = true;
  }
  auto ok = p.ch->send(h, b.data());
  {
    std::lock_guard<std::mutex> guard{p.m};
    p.sending = false;
  }
  p.cv.notify_all();
  if (!ok) {
    auto why = ok.error() + " (to rank " + std::to_string(to) + ")";
    fail_peer(p, why);
    return failure{why};
  }
  return {};
}

status communicator::wait(const std::function<void(completion)>& start) {
  auto pr = std::make_shared<std::promise<status>>();
  auto fut = pr->get_future();
  start([pr](const status& st, buffer) { pr->set_value(st); });
  return fut.get();
}

// ---- collectives ---------------------------------------------------------------------------------

namespace {

/// One operation's end, waited for by the collective thread.
struct flag {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::atomic<bool> ready{false}; ///< `done`, to poll without the lock
  status st;
  void set(const status& s) {
    {
      std::lock_guard<std::mutex> guard{m};
      st = s;
      done = true;
      ready.store(true);
    }
    cv.notify_all();
  }
  void wait_for(std::chrono::microseconds t) {
    std::unique_lock<std::mutex> lock{m};
    cv.wait_for(lock, t, [&] { return done; });
  }
  status wait() {
    std::unique_lock<std::mutex> lock{m};
    cv.wait(lock, [&] { return done; });
    return st;
  }
};
using flag_ptr = std::shared_ptr<flag>;

completion to_flag(const flag_ptr& f) {
  return [f](const status& st, buffer) { f->set(st); };
}

} // namespace

status communicator::sync_send(int32_t to, uint32_t tag, buffer b) {
  auto f = std::make_shared<flag>();
  send(to, tag, std::move(b), to_flag(f));
  return f->wait();
}

status communicator::sync_recv(int32_t from, uint32_t tag, buffer into) {
  auto f = std::make_shared<flag>();
  recv(from, tag, std::move(into), to_flag(f));
  return f->wait();
}

expected<std::vector<int32_t>> communicator::check_group(std::vector<int32_t> group,
                                                          int& index) const {
  if (group.empty())
    for (int32_t r = 0; r < world_; ++r)
      group.push_back(r);
  std::set<int32_t> seen;
  index = -1;
  for (size_t k = 0; k < group.size(); ++k) {
    auto r = group[k];
    if (r < 0 || r >= world_)
      return failure{"data plane: the group names rank " + std::to_string(r)
                     + ", outside the world of " + std::to_string(world_)};
    if (!seen.insert(r).second)
      return failure{"data plane: the group names rank " + std::to_string(r) + " twice"};
    if (r == rank_)
      index = static_cast<int>(k);
  }
  if (index < 0)
    return failure{"data plane: rank " + std::to_string(rank_) + " is not in the group"};
  return group;
}

uint32_t communicator::next_tag(const std::vector<int32_t>& group) {
  std::string key;
  for (auto r : group)
    key += std::to_string(r) + ",";
  auto seq = group_seq_[key]++;
  uint32_t h = 2166136261u;
  for (char c : key)
    h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
  return 0x80000000u | ((h & 0x7FFu) << 20) | (seq & 0xFFFFFu);
}

void communicator::run_collective(std::vector<int32_t> group,
                                  std::function<status(uint32_t tag)> body, completion done) {
  {
    std::lock_guard<std::mutex> guard{cmtx_};
    if (!stopping_ && started_) {
      collectives_.push_back([this, group = std::move(group), body = std::move(body),
                              done = std::move(done)] {
        // The tag is taken on the collective thread: its order is the calls' order.
        auto st = body(next_tag(group));
        if (!st) {
          // The group's ring is out of step (receives of this call stay posted on healthy
          // links, and would write into the tensor later): its links are broken, and
          // every member's waiting operations fail with this reason.
          for (auto r : group)
            if (r != rank_ && peers_[static_cast<size_t>(r)])
              fail_peer(*peers_[static_cast<size_t>(r)],
                        "data plane: a collective over this group failed (" + st.error()
                          + "); the group's links are closed");
        }
        done(st, {});
      });
      ccv_.notify_all();
      return;
    }
  }
  done(failure{"data plane: the communicator is not running"}, {});
}

namespace {

/// A ring pass's bytes one way, over a collective lane: [header][the steps' chunks][padding
/// to 8 bytes], a layout both members derive from the call.
struct lane_header {
  uint32_t magic = 0x4c434b4d; // "MKCL"
  uint32_t tag = 0;
  uint64_t count = 0;
};
static_assert(sizeof(lane_header) == 16, "a lane header is 16 bytes");

uint64_t pad8(uint64_t v) {
  return (v + 7) & ~uint64_t{7};
}

/// One direction of a ring pass as consecutive parts (on a lane: the header, the steps'
/// chunks, the padding; on plain links: the chunks), and how far it went.
struct pass_stream {
  struct part {
    uint8_t* at;
    uint64_t len;
  };
  std::vector<part> parts;
  size_t first_chunk = 0; ///< the part of step 0's chunk
  size_t k = 0;           ///< the part under way
  uint64_t off = 0;       ///< its bytes done

  pass_stream(bool lane, void* header, uint8_t* pad, const std::vector<part>& chunks)
    : first_chunk(lane ? 1 : 0) {
    uint64_t bytes = 0;
    if (lane)
      parts.push_back({static_cast<uint8_t*>(header), sizeof(lane_header)});
    for (auto& c : chunks) {
      parts.push_back(c);
      bytes += c.len;
    }
    if (lane)
      parts.push_back({pad, pad8(bytes) - bytes});
    skip_full();
  }
  void skip_full() {
    while (k < parts.size() && off == parts[k].len) {
      ++k;
      off = 0;
    }
  }
  void advance(uint64_t n) {
    off += n;
    skip_full();
  }
  bool done() const { return k >= parts.size(); }
  bool in_chunk() const { return k >= first_chunk && k + first_chunk < parts.size(); }
  part& now() { return parts[k]; }
  /// Bytes done of step s's chunk.
  uint64_t done_of_step(int s) const {
    auto j = first_chunk + static_cast<size_t>(s);
    return j < k ? parts[j].len : j == k ? off : 0;
  }
};

} // namespace

status communicator::ring_pass(buffer data, const std::vector<int32_t>& g, int i, uint32_t tag,
                               bool reduce) {
  int n = static_cast<int>(g.size());
  if (n == 1)
    return {};
  auto step = reduce ? reduce_scatter_step : allgather_step;
  auto next = g[static_cast<size_t>((i + 1) % n)];
  auto prev = g[static_cast<size_t>((i + n - 1) % n)];
  lane* out = peers_[static_cast<size_t>(next)]->ch->collective_lane();
  lane* in = peers_[static_cast<size_t>(prev)]->ch->collective_lane();
  const uint64_t total = data.count();
  const uint64_t esz = dtype_size(data.type());
  const uint64_t seg_bytes = std::max<uint64_t>(opts_.segment_bytes / esz, 1) * esz;
  auto* base = static_cast<uint8_t*>(data.data());
  const int steps = n - 1;
  // Step s sends what step s - 1 received (the chunk the ring passes on): its bytes may go as
  // soon as they have arrived (and, reducing, were added).
  for (int s = 1; s < steps; ++s)
    if (step(i, n, s).send_chunk != step(i, n, s - 1).recv_chunk)
      return failure{"data plane: internal error: the ring's schedule does not pass chunks on"};
  auto chunks = [&](bool sending) {
    std::vector<pass_stream::part> out;
    for (int s = 0; s < steps; ++s) {
      auto st = step(i, n, s);
      auto c = ring_chunk(total, n, sending ? st.send_chunk : st.recv_chunk);
      out.push_back({base + c.first * esz, c.count * esz});
    }
    return out;
  };
  lane_header sh, rh;
  sh.tag = tag;
  sh.count = total;
  uint8_t zeros[8] = {}, sink[8];
  pass_stream tx(out != nullptr, &sh, zeros, chunks(true));
  pass_stream rx(in != nullptr, &rh, sink, chunks(false));
  bool header_checked = !in;

  // Without a lane the receiving thread takes the frames (of a segment each), posted for
  // every step at once: they match in order.
  std::vector<flag_ptr> rflags;
  size_t rflag_next = 0;
  if (!in)
    for (auto& p : rx.parts)
      for (uint64_t o = 0; o < p.len; o += seg_bytes) {
        auto f = std::make_shared<flag>();
        pending_recv r{tag, data.slice((p.at - base + o) / esz, std::min(seg_bytes, p.len - o) / esz),
                       to_flag(f)};
        r.add = reduce;
        post_recv(prev, std::move(r));
        rflags.push_back(f);
      }

  // The bytes of the part under way that may be sent: step s >= 1's chunk as far as step
  // s - 1's has been received.
  auto tx_ready = [&]() -> uint64_t {
    if (!tx.in_chunk() || tx.k == tx.first_chunk)
      return tx.now().len;
    return rx.done_of_step(static_cast<int>(tx.k - tx.first_chunk) - 1);
  };
  static const uint64_t piece = [] { // interleaves both directions, stays in the cache
    auto* v = std::getenv("MONKEY_DP_PIECE_KB");
    return std::max<uint64_t>(v ? std::strtoull(v, nullptr, 10) : 64, 4) << 10;
  }();
  const uint64_t in_piece = in && in->piece_bytes() ? in->piece_bytes() : piece;
  const uint64_t out_piece = out && out->piece_bytes() ? out->piece_bytes() : piece;
  auto last_progress = clock::now();
  int idle = 0;
  auto who = [](int32_t r) { return " (rank " + std::to_string(r) + ")"; };

  for (;;) {
    bool moved = false;
    // Receive.
    if (in) {
      for (int k = 0; k < 4 && !rx.done(); ++k) {
        auto& p = rx.now();
        auto got = in->try_read(p.at + rx.off, std::min(p.len - rx.off, in_piece),
                                reduce && rx.in_chunk() ? std::optional<dtype>(data.type())
                                                        : std::nullopt);
        if (!got)
          return failure{got.error() + who(prev)};
        if (*got == 0)
          break;
        rx.advance(*got);
        moved = true;
        if (!header_checked && rx.k > 0) {
          header_checked = true;
          if (rh.magic != lane_header{}.magic || rh.tag != tag || rh.count != total)
            return failure{"data plane: rank " + std::to_string(prev)
                           + " is in another collective (tag " + std::to_string(rh.tag) + ", "
                           + std::to_string(rh.count) + " elements; this one: tag "
                           + std::to_string(tag) + ", " + std::to_string(total)
                           + "): every member must call the same collectives in the same order"};
        }
      }
    } else {
      while (rflag_next < rflags.size() && rflags[rflag_next]->ready.load()) {
        if (auto st = rflags[rflag_next]->wait(); !st)
          return st; // (run_collective closes the group's links: see there)
        ++rflag_next;
        rx.advance(std::min(seg_bytes, rx.now().len - rx.off));
        moved = true;
      }
    }
    // Send.
    if (out) {
      for (int k = 0; k < 4 && !tx.done(); ++k) {
        auto ready = tx_ready();
        if (ready <= tx.off)
          break;
        auto put = out->try_write(tx.now().at + tx.off, std::min(ready - tx.off, out_piece));
        if (!put)
          return failure{put.error() + who(next)};
        if (*put == 0)
          break;
        tx.advance(*put);
        moved = true;
      }
    } else {
      while (!tx.done()) {
        auto& p = tx.now();
        auto end = std::min(p.len, tx.off + seg_bytes);
        if (tx_ready() < end)
          break;
        if (auto ok = send_direct(next, tag,
                                  data.slice((p.at - base + tx.off) / esz, (end - tx.off) / esz));
            !ok)
          return ok;
        tx.advance(end - tx.off);
        moved = true;
      }
    }
    if (rx.done() && tx.done())
      return {};
    if (moved) {
      idle = 0;
      last_progress = clock::now();
      continue;
    }
    if (!in && !out) {
      // Frames both ways (tcp): only the receiving thread's next frame can move us on (a
      // pass that moves nothing waits for one).
      if (rflag_next < rflags.size())
        if (auto st = rflags[rflag_next]->wait(); !st)
          return st;
      continue;
    }
    // Nothing moved: poll a little, then give the core away, then sleep on what is awaited:
    // sockets in poll() on both directions at once (the kernel wakes us); memory briefly on
    // a lane's futex or the receiving thread's next frame (the other direction may move
    // meanwhile). The sending side waits for room only when it has bytes ready; otherwise
    // it waits for the receiving side.
    ++idle;
    if (idle < 64) {
      for (int k = 0; k < 16; ++k)
        cpu_pause();
      continue;
    }
    if (idle < 256) {
      std::this_thread::yield();
      continue;
    }
    if (clock::now() - last_progress > opts_.timeout) {
      auto r = !rx.done() ? prev : next;
      return failure{"data plane: rank " + std::to_string(r) + " moved nothing of a collective for "
                     + std::to_string(opts_.timeout.count())
                     + " ms: timed out (is it frozen?)"};
    }
    bool send_waits_room = out && !tx.done() && tx_ready() > tx.off;
    bool recv_waits = !rx.done();
    int in_fd = in && recv_waits ? in->poll_fd() : -1;
    int out_fd = send_waits_room ? out->poll_fd() : -1;
    bool mem_waits = (recv_waits && in_fd < 0) || (send_waits_room && out_fd < 0);
    if (!mem_waits) {
      pollfd fds[2];
      nfds_t k = 0;
      if (in_fd >= 0)
        fds[k++] = pollfd{in_fd, POLLIN, 0};
      if (out_fd >= 0)
        fds[k++] = pollfd{out_fd, POLLOUT, 0};
      ::poll(fds, k, 100);
      continue;
    }
    const std::chrono::microseconds nap{500};
    if (recv_waits && in) {
      if (auto st = in->wait(true, nap); !st)
        return failure{st.error() + who(prev)};
    } else if (send_waits_room) {
      if (auto st = out->wait(false, nap); !st)
        return failure{st.error() + who(next)};
    } else {
      rflags[rflag_next]->wait_for(nap);
    }
  }
}

namespace {

void scale(buffer b, span c, int n) {
  divide_elems(b.type(), b.slice(c.first, c.count).data(), c.count, n);
}

} // namespace

void communicator::allreduce(buffer buf, reduce_op op, std::vector<int32_t> group,
                             completion done) {
  int i = 0;
  auto g = check_group(std::move(group), i);
  if (!g)
    return done(failure{g.error()}, {});
  if (auto ok = check_reducible(buf.type(), op, "allreduce"); !ok)
    return done(ok, {});
  run_collective(
    *g, [this, buf, op, g = *g, i](uint32_t tag) -> status {
      auto n = static_cast<int>(g.size());
      auto direct = direct_allreduce(buf, op, g, i, tag);
      if (!direct)
        return failure{direct.error()};
      if (*direct)
        return {};
      if (auto ok = ring_pass(buf, g, i, tag, true); !ok)
        return ok;
      if (op == reduce_op::mean)
        scale(buf, ring_chunk(buf.count(), n, i), n);
      return ring_pass(buf, g, i, tag, false);
    },
    std::move(done));
}

void communicator::broadcast(buffer buf, int32_t root, std::vector<int32_t> group,
                             completion done) {
  int i = 0;
  auto g = check_group(std::move(group), i);
  if (!g)
    return done(failure{g.error()}, {});
  auto at = std::find(g->begin(), g->end(), root);
  if (at == g->end())
    return done(failure{"data plane: broadcast: the root, rank " + std::to_string(root)
                        + ", is not in the group"},
                {});
  int ri = static_cast<int>(at - g->begin());
  run_collective(
    *g, [this, buf, g = *g, i, ri](uint32_t tag) -> status {
      int n = static_cast<int>(g.size());
      int d = ((i - ri) % n + n) % n;
      auto next = g[static_cast<size_t>((i + 1) % n)];
      auto prev = g[static_cast<size_t>((i + n - 1) % n)];
      uint64_t seg = std::max<uint64_t>(opts_.segment_bytes / dtype_size(buf.type()), 1);
      std::vector<flag_ptr> recvs, sends;
      if (d > 0)
        for (uint64_t o = 0; o < buf.count(); o += seg) {
          auto f = std::make_shared<flag>();
          recv(prev, tag, buf.slice(o, std::min(seg, buf.count() - o)), to_flag(f));
          recvs.push_back(f);
        }
      status result;
      size_t k = 0;
      for (uint64_t o = 0; o < buf.count() && n > 1; o += seg, ++k) {
        if (d > 0)
          if (auto st = recvs[k]->wait(); !st) {
            result = st;
            break;
          }
        if (d < n - 1) {
          auto f = std::make_shared<flag>();
          send(next, tag, buf.slice(o, std::min(seg, buf.count() - o)), to_flag(f));
          sends.push_back(f);
        }
      }
      for (auto& f : sends)
        if (auto st = f->wait(); !st && result)
          result = st;
      return result;
    },
    std::move(done));
}

void communicator::reduce_scatter(buffer in, buffer out, reduce_op op,
                                  std::vector<int32_t> group, completion done) {
  int i = 0;
  auto g = check_group(std::move(group), i);
  if (!g)
    return done(failure{g.error()}, {});
  if (auto ok = check_reducible(in.type(), op, "reduce_scatter"); !ok)
    return done(ok, {});
  auto n = static_cast<int>(g->size());
  auto mine = ring_chunk(in.count(), n, i);
  if (out.type() != in.type() || out.count() != mine.count)
    return done(failure{"data plane: reduce_scatter: rank " + std::to_string(rank_)
                        + "'s output must hold its chunk, " + std::to_string(mine.count)
                        + " elements of " + std::to_string(in.count()) + " over "
                        + std::to_string(n) + " ranks (it holds "
                        + std::to_string(out.count()) + ")"},
                {});
  run_collective(
    *g, [this, in, out, op, g = *g, i, mine, n](uint32_t tag) mutable -> status {
      if (auto ok = ring_pass(in, g, i, tag, true); !ok)
        return ok;
      if (op == reduce_op::mean)
        scale(in, mine, n);
      if (out.bytes() > 0 && (!out.same_memory(in) || out.data() != in.slice(mine.first, 0).data()))
        std::memcpy(out.data(), in.slice(mine.first, mine.count).data(), out.bytes());
      return {};
    },
    std::move(done));
}

void communicator::allgather(buffer in, buffer out, std::vector<int32_t> group,
                             completion done) {
  int i = 0;
  auto g = check_group(std::move(group), i);
  if (!g)
    return done(failure{g.error()}, {});
  auto n = static_cast<int>(g->size());
  auto mine = ring_chunk(out.count(), n, i);
  if (out.type() != in.type() || in.count() != mine.count)
    return done(failure{"data plane: allgather: rank " + std::to_string(rank_) + "'s input must "
                        "hold its chunk of the output, " + std::to_string(mine.count)
                        + " elements of " + std::to_string(out.count()) + " over "
                        + std::to_string(n) + " ranks (it holds " + std::to_string(in.count())
                        + ")"},
                {});
  run_collective(
    *g, [this, in, out, g = *g, i, mine](uint32_t tag) mutable -> status {
      auto dst = out.slice(mine.first, mine.count);
      if (in.bytes() > 0 && dst.data() != in.data()) // (an empty chunk may have no memory)
        std::memcpy(dst.data(), in.data(), in.bytes());
      return ring_pass(out, g, i, tag, false);
    },
    std::move(done));
}

} // namespace monkey::dp
