// SPDX-License-Identifier: Apache-2.0
#pragma once
// A client session with a node, used by the `monkey` CLI, the console and tests: connects
// to the first reachable address, authenticates with the cluster secret (and checks the
// node's proof in return), then sends envelopes. CAF stays behind the pimpl.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runtime/certs.hpp"
#include "runtime/codec.hpp"
#include "runtime/expected.hpp"
#include "runtime/messages/client.hpp"

namespace monkey {

/// Where the node is: --address, else MONKEY_ADDRESS, else the cluster file under
/// MONKEY_HOME, else MONKEY_HOME/node/address (the default data directory's), else
/// localhost:4700. Each may list several addresses, comma-separated.
std::vector<std::string> find_addresses(const std::string& flag);

/// The secret file: --secret-file, else MONKEY_SECRET_FILE, else MONKEY_HOME/secret.
std::string find_secret_file(const std::string& flag);

/// The client's TLS files: DIR/client.pem, DIR/client.key and DIR/ca.pem (the name from
/// MONKEY_TLS_NAME), where DIR is --tls-dir, else MONKEY_TLS_DIR, else the folder named in
/// MONKEY_HOME/cluster.tls (written by `monkey up --tls`); none (plain TCP) otherwise.
tls_files find_tls_files(const std::string& flag_dir);

/// MONKEY_HOME, default ~/.monkey.
std::string monkey_home();

/// The user running this process (USER, else the password database) and the host name.
std::string current_user();
std::string current_host();

class client {
public:
  static expected<std::unique_ptr<client>> connect(const std::vector<std::string>& addresses,
                                                   const std::string& secret,
                                                   const tls_files& tls = find_tls_files(""));
  ~client();

  /// One request; the reply body or a sentence naming what went wrong.
  expected<std::string> call(verb v, const std::string& body,
                             std::chrono::milliseconds timeout = std::chrono::seconds(30));

  template <class Reply, class Request>
  expected<Reply> call(verb v, const Request& req,
                       std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
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
  std::string address_;
};

} // namespace monkey
