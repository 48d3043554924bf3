// SPDX-License-Identifier: Apache-2.0
// A rank's frames to itself (comm.hpp, communicator::self_link): copied in memory to the
// matching receive, or kept as a copy until one is posted.
#include <algorithm>
#include <cstring>

#include "runtime/dataplane/comm.hpp"

namespace monkey::dp {

namespace {

/// `from`'s bytes into `r`'s buffer (or a copy of them when it has none): the receive's
/// tensor, or why it cannot take them.
expected<buffer> copy_for(const buffer& from, buffer into, int32_t rank, uint32_t tag) {
  if (into.empty()) {
    buffer copy(from.type(), from.count());
    std::memcpy(copy.data(), from.data(), from.bytes());
    return copy;
  }
  if (into.type() != from.type() || into.count() != from.count())
    return failure{"data plane: rank " + std::to_string(rank) + " sent itself "
                   + std::to_string(from.count()) + " " + to_string(from.type())
                   + " elements under tag " + std::to_string(tag) + "; the receive expected "
                   + std::to_string(into.count()) + " " + to_string(into.type())};
  std::memcpy(into.data(), from.data(), from.bytes());
  return into;
}

} // namespace

void communicator::send_self(uint32_t tag, buffer buf, completion done) {
  std::unique_lock<std::mutex> lock{self_.m};
  if (self_.closed) {
    lock.unlock();
    return done(failure{"data plane: the communicator closed"}, {});
  }
  auto it = std::find_if(self_.posted.begin(), self_.posted.end(),
                         [&](const pending_recv& r) { return r.tag == tag; });
  if (it == self_.posted.end()) {
    buffer copy(buf.type(), buf.count());
    std::memcpy(copy.data(), buf.data(), buf.bytes());
    self_.sent[tag].push_back(std::move(copy));
    lock.unlock();
    return done({}, {});
  }
  auto r = std::move(*it);
  self_.posted.erase(it);
  lock.unlock();
  auto got = copy_for(buf, std::move(r.into), rank_, tag);
  done({}, {});
  if (got)
    r.done({}, std::move(*got));
  else
    r.done(failure{got.error()}, {});
}

void communicator::recv_self(pending_recv r) {
  std::unique_lock<std::mutex> lock{self_.m};
  if (self_.closed) {
    lock.unlock();
    return r.done(failure{"data plane: the communicator closed"}, {});
  }
  auto it = self_.sent.find(r.tag);
  if (it == self_.sent.end()) {
    self_.posted.push_back(std::move(r));
    return;
  }
  auto frame = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty())
    self_.sent.erase(it);
  lock.unlock();
  if (r.into.empty())
    return r.done({}, std::move(frame)); // the copy is the receive's now
  auto got = copy_for(frame, std::move(r.into), rank_, r.tag);
  if (got)
    r.done({}, std::move(*got));
  else
    r.done(failure{got.error()}, {});
}

} // namespace monkey::dp
