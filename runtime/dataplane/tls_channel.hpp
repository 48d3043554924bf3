// SPDX-License-Identifier: Apache-2.0
#pragma once
// TLS on the data plane's TCP links (docs/dataplane.md): on a `--tls` cluster the link is
// wrapped after its key proof, with mutual certificate authentication against the
// cluster's CA (the node's certificate and key, as for CAF's connections). OpenSSL's SSL
// object is not safe for a read and a write from two threads at once, so the socket is
// non-blocking, each SSL call runs under a mutex, and the threads wait in poll() outside it.

#include <chrono>
#include <memory>

#include "runtime/dataplane/tcp_link.hpp"
#include "runtime/dataplane/transport.hpp"
#include "runtime/net/certs.hpp"

namespace monkey::dp {

struct tls_context; // an SSL_CTX with the certificate, key and CA loaded

/// Loads the files (an error names the file and the problem).
expected<std::shared_ptr<tls_context>> make_tls_context(const tls_files& files);

/// Wraps a keyed link: the TLS handshake (the dialer is the client), then the channel
/// ("tls"). `timeout` bounds the handshake and any transfer that makes no progress.
expected<std::unique_ptr<channel>> make_tls_channel(tcp_link link,
                                                    std::shared_ptr<tls_context> ctx,
                                                    bool server,
                                                    std::chrono::milliseconds timeout);

} // namespace monkey::dp
