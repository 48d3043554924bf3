// SPDX-License-Identifier: Apache-2.0
#pragma once
// The one CAF configuration every Monkey binary applies (runtime, CLI, console, apps):
// message types, error category, scheduler size, and identical middleman heartbeat
// settings (CAF 0.17 drops peers whose heartbeat settings differ).

#include <chrono>
#include <string>

#include "runtime/net/certs.hpp"

namespace caf {
class actor_system_config;
}

namespace monkey {

struct net_settings {
  std::chrono::milliseconds heartbeat{250};
  std::chrono::milliseconds connection_timeout{2000};
  size_t max_threads = 2;
  /// When set, CAF's openssl module is loaded: every connection is TLS with mutual
  /// certificate authentication against `tls.ca`.
  tls_files tls;
};

/// Loads the middleman and applies `s` to `cfg`.
void apply_network_config(caf::actor_system_config& cfg, const net_settings& s = {});

/// "monkey-v<protocol>-<hash of the registered message types>", CAF's app identifier.
std::string app_identifier(const caf::actor_system_config& cfg);

/// Reads the effective settings back; returns "" when heartbeats are on, else why not.
status check_network_config(const caf::actor_system_config& cfg);

/// "host:port" → host and port; failure text when malformed.
status split_address(const std::string& address, std::string& host, uint16_t& port);

} // namespace monkey
