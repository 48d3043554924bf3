// SPDX-License-Identifier: Apache-2.0
#pragma once
// A client session with a node, used by the `monkey` CLI, the console and tests: connects
// to the first reachable address, authenticates with the cluster secret (and checks the
// node's proof in return), then sends envelopes. CAF stays behind the pimpl.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runtime/net/certs.hpp"
#include "runtime/wire/codec.hpp"
#include "runtime/expected.hpp"
#include "runtime/wire/messages/client.hpp"

namespace monkey {

/// Where the node is: --address, else MONKEY_ADDRESS, else the cluster file under
/// MONKEY_HOME, else MONKEY_HOME/node/address (the default data directory's), else
/// localhost:4700. Each may list several addresses, comma-separated.
std::vector<std::string> find_addresses(const std::string& flag);

/// The secret file: --secret-file, else MONKEY_SECRET_FILE, else MONKEY_HOME/secret.
std::string find_secret_file(const std::string& flag);

/// The key a client proves: the token in --token-file, else MONKEY_TOKEN_FILE, else
/// MONKEY_HOME/token; without a token file, the token derived from the secret file (found
/// as find_secret_file does). A failure says what to do.
expected<std::string> find_client_key(const std::string& token_flag,
                                      const std::string& secret_flag);

/// Who connects, and the key it proves (runtime/net/auth.hpp: client token, node key, or an
/// attempt's key).
struct credentials {
  credentials() = default;
  explicit credentials(std::string key) : key(std::move(key)) {}
  std::string key;
  std::string role = "client";
  std::string attempt; ///< app sessions: the attempt whose key `key` is
};

/// The client's TLS files: DIR/client.pem, DIR/client.key and DIR/ca.pem (the name from
/// MONKEY_TLS_NAME), where DIR is --tls-dir, else MONKEY_TLS_DIR, else the folder named in
/// MONKEY_HOME/cluster.tls (written by `monkey up --tls`); none (plain TCP) otherwise.
tls_files find_tls_files(const std::string& flag_dir);

/// MONKEY_HOME, default ~/.monkey.
std::string monkey_home();

/// The user running this process (USER, else the password database) and the host name.
std::string current_user();
std::string current_host();

/// How long one address may take to connect and authenticate (`monkey --timeout`).
constexpr std::chrono::milliseconds default_connect_timeout{5000};
/// How long one request may take by default.
constexpr std::chrono::milliseconds default_request_timeout{30000};

class client {
public:
  /// Tries each address in turn: connect, TLS handshake, hello and auth each within
  /// `timeout`; a node that does not answer in time is skipped (and named in the failure),
  /// one that refuses (wrong key, another version) ends the search.
  static expected<std::unique_ptr<client>> connect(const std::vector<std::string>& addresses,
                                                   const credentials& who,
                                                   const tls_files& tls = find_tls_files(""),
                                                   std::chrono::milliseconds timeout
                                                   = default_connect_timeout);
  ~client();

  /// One request; the reply body or a sentence naming what went wrong.
  expected<std::string> call(verb v, const std::string& body,
                             std::chrono::milliseconds timeout = default_request_timeout);

  template <class Reply, class Request>
  expected<Reply> call(verb v, const Request& req,
                       std::chrono::milliseconds timeout = default_request_timeout) {
    auto body = call(v, encode(req), timeout);
    if (!body)
      return failure{body.error()};
    return decode<Reply>(*body, to_string(v));
  }

  const std::string& address() const { return address_; }

  struct impl;

private:
  explicit client(const tls_files& tls);
  std::unique_ptr<impl> impl_;
  bool tls_ = false;
  std::string address_;
};

} // namespace monkey
