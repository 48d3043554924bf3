// SPDX-License-Identifier: Apache-2.0
// A guarded plain-TCP publish: CAF 0.17's BASP reads a message's payload into a buffer of
// the size its header announces (up to 4 GiB), zero-filled before a single byte arrives,
// and a random 30-byte header passes BASP's checks about once in fifty. Any process that
// reaches the port could so make a node allocate and touch gigabytes per connection (and
// stall its one multiplexer thread meanwhile) before proving anything. The doorman below
// accepts connections as CAF's own does, but with scribes that refuse a read larger than
// the limit: the connection is closed and logged instead.
//
// BASP alternates header reads (fixed size) and payload reads; the first payload on an
// accepted connection is the peer's handshake (well under a KiB), so it gets a tight limit
// and every later one the message limit. TLS publishes are not guarded here: there the
// bytes reach BASP only after the peer presented a certificate our CA signed.

#include "runtime/net/guard.hpp"

#include <sys/socket.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/doorman_impl.hpp>
#include <caf/io/network/scribe_impl.hpp>

#include "runtime/logging.hpp"

namespace monkey {

namespace {

using caf::io::receive_policy;
namespace network = caf::io::network;

std::atomic<uint64_t> refused_reads{0};

class guarded_scribe final : public network::scribe_impl {
public:
  guarded_scribe(network::default_multiplexer& mx, network::native_socket fd)
    : scribe_impl(mx, fd), fd_(fd) {}

  void configure_read(receive_policy::config config) override {
    ++reads_;
    // reads_ 1: the first header; 2: the handshake's payload (or the next header of a
    // payload-less message, smaller still); later: message payloads and headers.
    size_t limit = reads_ <= 2 ? guard_limits::handshake_bytes : guard_limits::message_bytes;
    if (!refused_ && config.second > limit) {
      refused_ = true;
      refused_reads.fetch_add(1, std::memory_order_relaxed);
      static auto log = logger("net");
      log->warn("closing a connection from {}:{}: its message announces {} bytes, more than "
                "the {} allowed {}",
                addr(), port(), config.second, limit,
                reads_ <= 2 ? "before the handshake" : "for one message");
      // Nothing large is allocated: read one byte at most, and end the connection so that
      // the read fails at once (the peer need not send or close anything).
      scribe_impl::configure_read(receive_policy::at_most(1));
      ::shutdown(fd_, SHUT_RDWR);
      return;
    }
    scribe_impl::configure_read(refused_ ? receive_policy::at_most(1) : config);
  }

  bool consume(caf::execution_unit* ctx, const void* buf, size_t n) override {
    if (refused_) {
      // Bytes that came in after the refusal: the connection is over (as on a read error).
      io_failure(ctx, network::operation::read);
      return false;
    }
    return scribe_impl::consume(ctx, buf, n);
  }

private:
  network::native_socket fd_;
  size_t reads_ = 0;
  bool refused_ = false;
};

class guarded_doorman final : public network::doorman_impl {
public:
  using doorman_impl::doorman_impl;

  bool new_connection() override {
    // As doorman_impl::new_connection, with a guarded scribe.
    if (detached())
      return false;
    auto& mx = acceptor_.backend();
    auto fd = acceptor_.accepted_socket();
    (void) network::keepalive(fd, true);
    caf::io::scribe_ptr sptr = caf::make_counted<guarded_scribe>(mx, fd);
    auto hdl = sptr->hdl();
    parent()->add_scribe(std::move(sptr));
    return doorman::new_connection(&mx, hdl);
  }
};

} // namespace

uint64_t guard_refusals() {
  return refused_reads.load(std::memory_order_relaxed);
}

caf::expected<uint16_t> publish_guarded(const caf::actor& whom, uint16_t port,
                                        const char* host) {
  if (!whom)
    return caf::sec::cannot_publish_invalid_actor;
  auto& mm = whom.home_system().middleman();
  auto* mx = dynamic_cast<network::default_multiplexer*>(&mm.backend());
  if (mx == nullptr) // another backend (never in Monkey's binaries): CAF's own publish
    return mm.publish(whom, port, host, true);
  auto fd = network::new_tcp_acceptor_impl(port, host, true);
  if (!fd)
    return std::move(fd.error());
  caf::io::doorman_ptr dm = caf::make_counted<guarded_doorman>(*mx, *fd);
  auto actual = dm->port();
  // What CAF's middleman actor does after opening the port (middleman_actor_impl::put).
  auto basp = mm.named_broker<caf::io::basp_broker>(caf::atom("BASP"));
  caf::anon_send(basp, caf::publish_atom::value, std::move(dm), actual,
                 caf::actor_cast<caf::strong_actor_ptr>(whom), std::set<std::string>{});
  return actual;
}

} // namespace monkey
