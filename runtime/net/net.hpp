// SPDX-License-Identifier: Apache-2.0
#pragma once
// Publishing and connecting, plain or TLS: every binary goes through these so that a node
// started with --tls speaks TLS on every connection it makes or accepts. Included only by
// .cpp files that already use CAF's network layer.

#include <chrono>
#include <cstdint>
#include <string>

#include <caf/fwd.hpp>
#include <caf/io/middleman_actor.hpp>

namespace monkey {

/// True when this actor system loaded CAF's openssl module (apply_network_config with TLS
/// files).
bool tls_enabled(caf::actor_system& sys);

/// The middleman actor to send connect/publish requests to: the openssl module's when TLS
/// is on, else the plain one.
caf::io::middleman_actor connector(caf::actor_system& sys);

/// Publishes `whom` on `port` (0 = any) at `host` ("" or "0.0.0.0" = every interface).
caf::expected<uint16_t> publish_actor(const caf::actor& whom, uint16_t port,
                                      const std::string& host);

/// Stops accepting connections for `whom` on `port`.
void unpublish_actor(const caf::actor& whom, uint16_t port);

/// A handle to the actor published at host:port (blocking, at most `timeout`; for clients).
/// How long CAF takes to close a connection that connect_actor abandoned at its deadline
/// (two heartbeats): the broker and a half-open connection to a frozen node keep each other
/// alive until then, and a process that exits sooner leaks both (LeakSanitizer: "indirect
/// leak ... make_actor<caf::io::basp_broker>").
std::chrono::milliseconds connect_settle_time(const caf::actor_system& sys);

caf::expected<caf::actor> connect_actor(caf::actor_system& sys, const std::string& host,
                                        uint16_t port, std::chrono::milliseconds timeout);

/// A sentence for a failed connection, naming TLS as the likely cause of a handshake that
/// broke off when TLS is on (CAF reports only "disconnect during handshake").
std::string describe_connect_error(caf::actor_system& sys, const caf::error& err,
                                   const std::string& address);

/// Whether a failed connect proves that nothing listens at the address (TCP refused), and
/// its sentence. A TLS handshake that failed (CAF 0.17 reports it like a refusal) is not.
struct connect_failure {
  bool refused = false;
  std::string text;
};
connect_failure explain_connect_error(caf::actor_system& sys, const caf::error& err,
                                      const std::string& address);

} // namespace monkey
