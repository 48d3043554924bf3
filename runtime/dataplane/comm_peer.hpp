// SPDX-License-Identifier: Apache-2.0
#pragma once
// A communicator's state per peer (comm.hpp): shared by comm.cpp (the receiving and sending
// threads, the collectives) and comm_send.cpp (sends, by value and by reference). Private to
// the data plane.

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/dataplane/comm.hpp"

namespace monkey::dp {

using clock = std::chrono::steady_clock;

struct communicator::peer {
  int32_t rank = -1;
  std::unique_ptr<channel> ch;
  std::mutex m;
  std::condition_variable cv;
  std::deque<pending_send> sends;
  std::deque<pending_recv> posted;
  /// Frames that came before their receive, by tag, in order: one still being read is
  /// incomplete, and a receive that takes it waits on it.
  struct early {
    frame_header h;
    buffer data;
    bool complete = false;
    std::optional<pending_recv> waiter;
  };
  std::map<uint32_t, std::deque<std::shared_ptr<early>>> unexpected;
  /// Buffers that held early frames, kept for the next ones of the same size (fresh memory
  /// is slow to touch on these machines; collectives send the same sizes over and over).
  std::map<std::pair<dtype, uint64_t>, std::vector<buffer>> pool;
  uint64_t pooled_bytes = 0;
  /// Sends by reference whose receiver has not yet copied the tensor, by id (their
  /// completions run at its acknowledgement).
  struct by_ref {
    buffer buf;
    completion done;
    clock::time_point since;
  };
  std::map<uint64_t, by_ref> refs;
  uint64_t next_ref = 1;
  std::vector<uint8_t> scratch; ///< the receiving thread's, for tensors added by address
  bool sending = false; ///< a thread is writing a frame to the channel
  std::string broken; ///< why the link failed ("": it works)
  bool stopping = false;
  clock::time_point last_frame = clock::now();
  clock::time_point waiting_since = clock::now(); ///< when `posted` last became non-empty
  std::thread rx, tx;
};

} // namespace monkey::dp
