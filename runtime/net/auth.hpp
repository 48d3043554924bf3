// SPDX-License-Identifier: Apache-2.0
#pragma once
// The cluster secret and HMAC-SHA256 challenge-response. The secret never crosses the
// network: each side proves knowledge of it by MACing the other side's fresh nonce.

#include <cstdint>
#include <optional>
#include <string>

#include "runtime/expected.hpp"

namespace monkey {

/// Reads the secret file; creates it (mode 0600, 32 random bytes as hex) when `create`
/// is set and it does not exist. Refuses a file readable by group or others.
expected<std::string> load_secret(const std::string& path, bool create);

/// HMAC-SHA256(key, message) as raw bytes.
std::string hmac_sha256(const std::string& key, const std::string& message);

/// A fresh random nonce (32 bytes).
std::string make_nonce();

/// What a client sends to prove it knows the secret.
std::string client_proof(const std::string& secret, const std::string& server_nonce,
                         const std::string& client_nonce, const std::string& user);

/// What the server sends back to prove it knows the secret too.
std::string server_proof(const std::string& secret, const std::string& server_nonce,
                         const std::string& client_nonce);

/// Constant-time comparison.
bool equal_digest(const std::string& a, const std::string& b);

// ---- roles --------------------------------------------------------------------------------
// Nodes, clients and app hosts prove different keys, all derived from the cluster secret,
// so that what a user holds (the client token) gives away neither the node key nor the
// secret, and a session's role is proven by the key it used (docs/cluster.md, Security).

enum class role : uint8_t {
  client = 0, ///< the monkey CLI, the console, tests: client verbs only
  node = 1,   ///< another monkey-runtime: node-to-node verbs (and the queries nodes ask)
  app = 2,    ///< an app host, with a key of one attempt: the app SDK's verbs only
};

const char* to_string(role r);
/// "client", "node" or "app"; nullopt otherwise.
std::optional<role> parse_role(const std::string& text);

/// What a node proves to other nodes: HMAC(secret, "monkey-node-key-v1").
std::string node_key(const std::string& secret);
/// What a client proves: HMAC(secret, "monkey-client-token-v1") as 64 hex digits. Hand
/// users this token (the `token` file), not the secret.
std::string client_token(const std::string& secret);
/// What the app host of one attempt proves: HMAC(node key, "monkey-attempt-key-v1\n" + id).
std::string attempt_key(const std::string& node_key, const std::string& attempt_id);

/// Reads a token file (64 hex digits); refuses a file readable by others.
expected<std::string> load_token(const std::string& path);
/// Writes the client token next to the secret (`DIR/token`, 0600) unless it exists.
status write_token_file(const std::string& path, const std::string& token);

} // namespace monkey
