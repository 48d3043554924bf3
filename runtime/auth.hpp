// SPDX-License-Identifier: Apache-2.0
#pragma once
// The cluster secret and HMAC-SHA256 challenge-response. The secret never crosses the
// network: each side proves knowledge of it by MACing the other side's fresh nonce.

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

} // namespace monkey
