// SPDX-License-Identifier: Apache-2.0
#pragma once
// Monkey's error codes, carried in caf::error with category "monkey" and a sentence as
// context. Replies across actor boundaries carry these, never exceptions.

#include <cstdint>
#include <string>

#include <caf/fwd.hpp>

namespace monkey {

enum class errc : uint8_t {
  bad_request = 1,   ///< malformed or invalid input
  not_found,         ///< no such job / attempt
  unauthenticated,   ///< the peer has not proven the cluster secret
  refused,           ///< authentication failed, or the node does not accept work now
  busy,              ///< a bounded queue is full; try again
  journal_failure,   ///< the journal could not make a transition durable
  conflict,          ///< the request does not fit the current state (cancel a finished job)
  internal,          ///< a bug: an invariant broke
  under_replicated,  ///< journaled here, but not every holder confirmed it: it may exist
  unavailable,       ///< the node cannot answer now (a peer did not answer in time)
  unreachable,       ///< no link to a peer: cannot connect, nothing published, no hello
  connection_refused, ///< nothing listens at a peer's address: its process is gone
};

const char* to_string(errc x);

/// A caf::error of category "monkey" whose context is `message`.
caf::error make_error(errc code, std::string message);

/// Whether `err` is a Monkey error with this code.
bool is(const caf::error& err, errc code);

/// The sentence of an error made by make_error, or CAF's own rendering of others.
std::string describe(const caf::error& err);

} // namespace monkey
