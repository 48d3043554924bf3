// SPDX-License-Identifier: Apache-2.0
#pragma once
// Plain-TCP publishing whose connections refuse oversized BASP reads (guard.cpp says why).

#include <cstddef>
#include <cstdint>

#include <caf/fwd.hpp>

namespace monkey {

struct guard_limits {
  /// The first payload of an accepted connection: CAF's handshake (a node id, the app
  /// identifier, the published actor: a few hundred bytes).
  static constexpr size_t handshake_bytes = 64 * 1024;
  /// Any later message: an envelope's body is at most 16 MiB (wire/codec.hpp), an app
  /// message's body as much; the rest is CAF's framing.
  static constexpr size_t message_bytes = 64 * 1024 * 1024;
};

/// Publishes `whom` on `port` (0: any) at `host` (nullptr: every interface) like CAF's
/// middleman().publish, with guarded connections.
caf::expected<uint16_t> publish_guarded(const caf::actor& whom, uint16_t port,
                                        const char* host);

/// Connections this process closed for an oversized read (for tests and `status`).
uint64_t guard_refusals();

} // namespace monkey
