// SPDX-License-Identifier: Apache-2.0
#pragma once
// Requests to other nodes, for the actors that talk to peers (coordinator, query): one
// request through the membership actor's authenticated link to a node's gateway, and the
// same request to many nodes with one callback per answer and one at the end. Every
// request has a timeout; every answer (or error) is delivered exactly once.
// Included only by actor .cpp files (it needs CAF).

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/membership/membership.hpp"
#include "runtime/wire/atoms.hpp"
#include "runtime/wire/envelope.hpp"
#include "runtime/wire/messages/client.hpp"

namespace monkey {

/// Subscribes `self` to the membership actor's member lists (it answers with the list at
/// once and sends every change); `membership` keeps its handle for requests. While the
/// membership actor is not registered yet (it starts after the core), asks again in 100 ms
/// with `(subscribe)` to itself.
template <class Self>
void subscribe_members(Self* self, caf::actor& membership) {
  auto m = caf::actor_cast<caf::actor>(
    self->system().registry().get(caf::atom_from_string(membership_name)));
  if (!m) {
    self->delayed_send(self, std::chrono::milliseconds(100), atoms::subscribe::value);
    return;
  }
  membership = m;
  self->monitor(m);
  self->send(m, atoms::subscribe::value);
}

/// A peer's answer: its reply body, or why there is none.
struct peer_answer {
  std::string node;
  std::optional<std::string> body;
  caf::error err;
  explicit operator bool() const { return body.has_value(); }
};

/// One request to `node`'s gateway through the membership's link (`timeout` at the peer;
/// the local request waits one second longer).
template <class Self>
auto ask_node(Self* self, const caf::actor& membership, const std::string& node, verb v,
              std::string body, std::chrono::milliseconds timeout) {
  return self->request(membership, timeout + std::chrono::seconds(1), atoms::forward::value,
                       node, envelope{static_cast<uint16_t>(v), std::move(body)},
                       static_cast<uint32_t>(timeout.count()));
}

/// Asks every node of `nodes` the same request. `each` gets each answer as it arrives;
/// `done` runs once after the last one (at once when `nodes` is empty or there is no
/// membership actor, in which case every node counts as not answering).
template <class Self>
void fan_out(Self* self, const caf::actor& membership, const std::vector<std::string>& nodes,
             verb v, const std::string& body, std::chrono::milliseconds timeout,
             std::function<void(const peer_answer&)> each, std::function<void()> done) {
  if (nodes.empty())
    return done();
  if (!membership) {
    for (auto& n : nodes) {
      peer_answer a;
      a.node = n;
      a.err = caf::sec::request_receiver_down;
      each(a);
    }
    return done();
  }
  auto pending = std::make_shared<size_t>(nodes.size());
  auto finish = [pending, done] {
    if (--*pending == 0)
      done();
  };
  for (auto& n : nodes)
    ask_node(self, membership, n, v, body, timeout)
      .then(
        [=](std::string& reply) {
          peer_answer a;
          a.node = n;
          a.body = std::move(reply);
          each(a);
          finish();
        },
        [=](caf::error& err) {
          peer_answer a;
          a.node = n;
          a.err = std::move(err);
          each(a);
          finish();
        });
}

} // namespace monkey
