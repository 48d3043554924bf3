// SPDX-License-Identifier: Apache-2.0
#pragma once
// A rank's communicator (issue #11; docs/dataplane.md): point-to-point sends and receives
// matched by (peer, tag), and the collectives over a group of ranks (ring all-reduce, chunked
// and pipelined; broadcast; reduce-scatter; allgather), on channels (transport.hpp) to every
// other rank. Every operation is asynchronous: it is queued and its completion runs on a data
// plane thread when it is done or failed (the SDK turns it into a message to the actor).
//
// Threads: per peer one receiving (it matches arriving frames with posted receives, reading a
// payload straight into the receive's buffer) and one sending; per rank one running the
// collectives in the order they were called. Every rank of a group must call the same
// collectives with the same group in the same order (as with MPI and NCCL).
//
// Failure: a peer that closes or dies fails every operation waiting on it at once; a peer that
// sends nothing for `timeout` while a receive waits on it fails that receive ("timed out"),
// and the link to it is broken from then on (its stream can no longer be trusted).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "monkey/sdk/tensor.hpp"
#include "runtime/dataplane/reduce.hpp"
#include "runtime/dataplane/transport.hpp"
#include "runtime/expected.hpp"

namespace monkey::dp {

class arena; // arena.hpp

// ---- the ring schedule (pure; comm.test.cpp) -----------------------------------------------------

/// Element range [first, first + count) of chunk `c` when `total` elements are split into `n`
/// chunks: the first total % n chunks one element longer.
struct span {
  uint64_t first = 0, count = 0;
};
span ring_chunk(uint64_t total, int n, int c);

/// One step of the ring at group index `i` of `n`: the chunk sent to the next member and the
/// chunk received from the previous one. Reduce-scatter steps s = 0..n-2 leave member i
/// holding the full reduction of chunk i; allgather steps s = 0..n-2 then pass it on.
struct ring_step {
  int send_chunk = 0, recv_chunk = 0;
};
ring_step reduce_scatter_step(int i, int n, int s);
ring_step allgather_step(int i, int n, int s);

/// The reference order of the ring's sum: chunk c is summed from group index (c + 1) % n
/// onwards, one member after the other (what the tests compare against, bit for bit).
int ring_sum_start(int c, int n);


// ---- the communicator ----------------------------------------------------------------------------

struct comm_options {
  std::chrono::milliseconds timeout{60000}; ///< a waiting receive's patience with a silent peer
  uint64_t max_frame_bytes = uint64_t{1} << 34; ///< larger frames are refused
  uint64_t segment_bytes = 4 << 20;             ///< the collectives' pipelining unit
  /// The most bytes of frames that arrived before their receive, from all peers together
  /// (the first one is always taken, whatever its size). Past it a peer's receiving thread
  /// stops reading (the sender waits: flow control) until receives take early frames or
  /// one is posted for the frame at hand; after `timeout` so, the link fails, naming the
  /// tag (an app that sends what it never receives), instead of memory growing without end.
  uint64_t max_early_bytes = uint64_t{1} << 30;
};

/// What an operation ends with: ok or the error, and for a receive the data received.
using completion = std::function<void(const status&, buffer)>;

class communicator {
public:
  communicator(int32_t rank, int32_t world, comm_options opts = {});
  ~communicator();
  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;

  /// The channel to `peer` (before start()).
  void attach(int32_t peer, std::unique_ptr<channel> ch);
  /// Starts the threads; every other rank must have a channel.
  status start();
  /// Fails what is pending and stops the threads (the channels close).
  void close();

  int32_t rank() const { return rank_; }
  int32_t world() const { return world_; }
  /// Bytes of frames kept before their receive (comm_options::max_early_bytes).
  uint64_t early_bytes() const { return early_bytes_.load(); }
  /// The transport to `peer` ("tcp", "shm", "local"; "" for itself or none).
  std::string transport(int32_t peer) const;
  /// Ok while the link to `peer` works and its process is there; else why not (naming the
  /// rank). Itself: always ok. For waits outside the communicator (NCCL's, apps/sdk/gpu.cpp).
  status alive(int32_t peer);
  /// comm_options::timeout: how long a wait may see nothing from a peer.
  std::chrono::milliseconds timeout() const { return opts_.timeout; }

  /// Sends `buf` to `to` under `tag` (user tags below 2^31). A rank may send to itself (two
  /// actors of one rank, e.g. a worker and the parameter server beside it): the frame is
  /// copied in memory to its receive.
  void send(int32_t to, uint32_t tag, buffer buf, completion done);
  /// Receives the next frame `from` sends under `tag`: into `into` when given (its type and
  /// count must match the frame's), else into a new buffer of the frame's size.
  void recv(int32_t from, uint32_t tag, buffer into, completion done);

  /// The collectives over `group` (every rank when empty; this rank must be in it).
  void allreduce(buffer buf, reduce_op op, std::vector<int32_t> group, completion done);
  void broadcast(buffer buf, int32_t root, std::vector<int32_t> group, completion done);
  /// `out` gets this member's chunk (ring_chunk(in.count(), n, index)) of the reduction of
  /// every member's `in`; `in` is left as scratch.
  void reduce_scatter(buffer in, buffer out, reduce_op op, std::vector<int32_t> group,
                      completion done);
  /// `out` (n chunks of ring_chunk) gets every member's `in` (its chunk) in group order.
  void allgather(buffer in, buffer out, std::vector<int32_t> group, completion done);

  /// Blocking helpers (tests, benchmarks; never on an actor's thread).
  status wait(const std::function<void(completion)>& start);

  /// Registered buffers (arena.hpp). This process's shared arena and each peer's that is
  /// mapped here (ranks of this machine; a local rank's is this process's own), before
  /// start(): mesh::connect sets them.
  void use_arena(std::shared_ptr<arena> own);
  void set_peer_arena(int32_t peer, std::shared_ptr<uint8_t> base, uint64_t bytes);
  /// Sends by address (frame.hpp, frame_by_addr; transport.hpp, peer_memory), before
  /// start(): `read_pid` is `peer`'s process id when this process can read its memory with
  /// process_vm_readv, same_process for a rank of this process (memcpy), else 0; `reads_me`:
  /// `peer` reads this process's memory, so a send of a tensor that is not registered, from
  /// MONKEY_DP_CMA_KB (64 KB) to MONKEY_DP_CMA_MAX_MB (32 MB), goes as its address, and
  /// `peer` copies it once.
  void set_peer_cma(int32_t peer, int32_t read_pid, bool reads_me);
  /// Whether this rank and `peer` read each other's memory (sends by address both ways, and
  /// all-reduces in place of heap tensors).
  bool single_copy(int32_t peer) const;
  static constexpr int32_t same_process = -1; ///< cma::same_process
  /// `count` zeroed elements of `t` for collectives: in the shared arena when this rank has
  /// one with room, else on the heap. An all-reduce whose members all pass arena buffers
  /// (all on one machine) reads the others' tensors in place instead of through the rings.
  buffer alloc(dtype t, uint64_t count);
  /// Whether `b` lies in this process's shared arena.
  bool registered(const buffer& b) const;
  /// All-reduces done in place over registered buffers (the others took the rings).
  uint64_t in_place_allreduces() const { return in_place_.load(); }
  /// Sends of registered tensors that the receiver copied from this process's arena (one
  /// copy instead of two through a ring: MONKEY_DP_REF_KB, 64 KB and larger by default).
  uint64_t by_ref_sends() const { return by_ref_sends_.load(); }
  /// Sends of tensors that the receiver read from this process's memory (sends by address:
  /// set_peer_cma).
  uint64_t by_addr_sends() const { return by_addr_sends_.load(); }

private:
  struct peer;
  struct pending_recv {
    uint32_t tag;
    buffer into;
    completion done;
    bool add = false; ///< add the frame into `into` (its element type) instead of copying it
  };
  struct pending_send {
    frame_header h;
    buffer buf;
    completion done;
  };
  /// Frames a rank sends to itself: matched with its receives in memory.
  struct self_link {
    std::mutex m;
    std::deque<pending_recv> posted;
    std::map<uint32_t, std::deque<buffer>> sent; ///< copies sent before their receive
    bool closed = false;
  };
  void send_self(uint32_t tag, buffer buf, completion done);
  /// Writes a frame to `p`'s channel from this thread when nothing is queued and it fits at
  /// once, else queues it for the sending thread (`first`: ahead of the queue, for an
  /// acknowledgement); `done` (may be empty) runs when written.
  void put_frame(peer& p, const frame_header& h, buffer buf, completion done,
                 bool first = false);
  /// Single-copy sends of registered tensors to a rank that maps this process's arena
  /// (frame.hpp, frame_by_ref): `buf`'s offset in the arena, or not_registered (too small,
  /// not in it, or the peer has no view of it: a plain frame then).
  uint64_t ref_offset(int32_t to, const buffer& buf) const;
  /// Whether `buf` goes to `to` by address (set_peer_cma).
  bool by_address(int32_t to, const buffer& buf) const;
  /// A by-address frame's tensor, read from `p`'s memory into `into` (added to it when `add`).
  status read_by_addr(peer& p, const frame_header& h, uint64_t addr, void* into, bool add);
  /// A by-reference frame's payload read: where the tensor lies in `p`'s mapped arena (by
  /// address: its address in `p`'s process, when this process can read it).
  expected<const uint8_t*> resolve_ref(peer& p, const frame_header& h, uint64_t& id);
  /// Tells `p` its tensor was copied / completes the send it acknowledges.
  void ack_ref(peer& p, uint32_t tag, uint64_t id);
  status take_ack(peer& p, const frame_header& h);
  void recv_self(pending_recv r);
  void rx_loop(peer& p);
  void tx_loop(peer& p);
  void fail_peer(peer& p, const std::string& why);
  /// Completes a receive with a frame's data (copied into its buffer, or checked and refused
  /// when the sizes differ).
  void deliver(peer& p, const frame_header& h, pending_recv r, buffer data);
  buffer take_pooled(peer& p, dtype t, uint64_t count);
  void give_back(peer& p, buffer b);
  /// Queues a collective over `group` for the collective thread; `body` gets its tag.
  void run_collective(std::vector<int32_t> group, std::function<status(uint32_t tag)> body,
                      completion done);
  status sync_send(int32_t to, uint32_t tag, buffer b);
  /// A receive that adds the frame into `into` (reduce-scatter's, read straight from a ring).
  void post_recv(int32_t from, pending_recv r);
  /// Sends from the collective thread itself (it may block): no hand-over to the sending
  /// thread; waits its turn when that thread is writing.
  status send_direct(int32_t to, uint32_t tag, const buffer& b);
  status sync_recv(int32_t from, uint32_t tag, buffer into);
  status sync_sendrecv(int32_t to, buffer out, int32_t from, buffer in, uint32_t tag);
  expected<std::vector<int32_t>> check_group(std::vector<int32_t> group, int& index) const;
  uint32_t next_tag(const std::vector<int32_t>& group);
  /// The reduce-scatter half of the ring (`reduce`: member i ends with the sum of chunk i)
  /// or its allgather half (the finished chunks passed around).
  status ring_pass(buffer data, const std::vector<int32_t>& g, int i, uint32_t tag, bool reduce);
  /// The all-reduce over registered buffers (comm_direct.cpp): true when done so, false when
  /// a member's buffer is not registered or not mapped here (every member then takes the
  /// ring), or the failure.
  expected<bool> direct_allreduce(buffer buf, reduce_op op, const std::vector<int32_t>& g,
                                  int i, uint32_t tag);
  /// Fails when the link to `r` broke or its process is gone (the reason names `r`).
  status peer_alive(int32_t r);

  struct mapped_arena {
    std::shared_ptr<uint8_t> base;
    uint64_t bytes = 0;
  };
  std::shared_ptr<arena> arena_;
  std::vector<mapped_arena> peer_arenas_; ///< by rank
  std::atomic<uint64_t> in_place_{0};
  std::atomic<uint64_t> by_ref_sends_{0};
  struct cma_view {
    int32_t read_pid = 0;
    bool reads_me = false;
  };
  std::vector<cma_view> peer_cma_; ///< by rank
  std::atomic<uint64_t> by_addr_sends_{0};

  int32_t rank_, world_;
  comm_options opts_;
  std::vector<std::unique_ptr<peer>> peers_;
  self_link self_;
  std::map<std::string, uint32_t> group_seq_; ///< the collective thread's only
  std::atomic<uint64_t> early_bytes_{0};      ///< frames kept before their receive

  std::mutex cmtx_;
  std::condition_variable ccv_;
  std::deque<std::function<void()>> collectives_;
  bool stopping_ = false;
  bool started_ = false;
  std::thread coll_thread_;
};

} // namespace monkey::dp
