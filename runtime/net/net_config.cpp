// SPDX-License-Identifier: Apache-2.0
#include "runtime/net/net_config.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include "runtime/net/net.hpp"
#include "runtime/net/guard.hpp"

#include "runtime/wire/envelope.hpp"
#include "runtime/errc.hpp"
#include "runtime/wire/messages/client.hpp"

namespace monkey {

const char* to_string(errc x) {
  switch (x) {
    case errc::bad_request: return "bad_request";
    case errc::not_found: return "not_found";
    case errc::unauthenticated: return "unauthenticated";
    case errc::refused: return "refused";
    case errc::busy: return "busy";
    case errc::journal_failure: return "journal_failure";
    case errc::conflict: return "conflict";
    case errc::internal: return "internal";
    case errc::under_replicated: return "under_replicated";
    case errc::unavailable: return "unavailable";
    case errc::unreachable: return "unreachable";
    case errc::connection_refused: return "connection_refused";
  }
  return "unknown";
}

caf::error make_error(errc code, std::string message) {
  return caf::error{static_cast<uint8_t>(code), caf::atom("monkey"),
                    caf::make_message(std::move(message))};
}

bool is(const caf::error& err, errc code) {
  return err.category() == caf::atom("monkey") && err.code() == static_cast<uint8_t>(code);
}

std::string describe(const caf::error& err) {
  if (err.category() == caf::atom("monkey") && err.context().match_elements<std::string>())
    return err.context().get_as<std::string>(0);
  if (err == caf::sec::request_timeout)
    return "the node did not answer in time";
  if (err == caf::sec::request_receiver_down)
    return "the node went away while answering";
  return caf::to_string(err);
}

std::string app_identifier(const caf::actor_system_config& cfg) {
  // The protocol version and an FNV-1a hash of every registered message type name, so
  // that peers built with another type list are refused at CAF's handshake.
  // MONKEY_TEST_PROTOCOL_VERSION overrides the version (only the version-mismatch test uses it).
  uint32_t version = protocol_version;
  if (auto* v = std::getenv("MONKEY_TEST_PROTOCOL_VERSION"); v && *v)
    version = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
  std::vector<std::string> names;
  for (auto& kv : cfg.value_factories_by_name)
    names.push_back(kv.first);
  std::sort(names.begin(), names.end());
  uint64_t h = 1469598103934665603ull;
  for (auto& n : names)
    for (char c : n + ";") {
      h ^= static_cast<unsigned char>(c);
      h *= 1099511628211ull;
    }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return "monkey-v" + std::to_string(version) + "-" + std::string(hex, 8);
}

int tls_hygiene_installed(); // runtime/net/tls_hygiene.cpp
std::string take_tls_failure();

void apply_network_config(caf::actor_system_config& cfg, const net_settings& s) {
  cfg.load<caf::io::middleman>();
  cfg.add_message_type<envelope>("monkey.envelope");
  cfg.add_message_type<app_message>("monkey.app_message");
  cfg.add_error_category(caf::atom("monkey"),
                         [](uint8_t code, caf::atom_value, const caf::message& ctx) {
                           std::string text = ctx.match_elements<std::string>()
                                                ? ctx.get_as<std::string>(0)
                                                : caf::to_string(ctx);
                           return std::string("monkey.") + to_string(static_cast<errc>(code))
                                  + ": " + text;
                         });
  cfg.set("scheduler.max-threads", s.max_threads);
  // Work stealing lets idle threads sleep 10 ms between polls: every message from a
  // non-actor thread (the launcher) then waits for a wake-up. The sharing policy wakes a
  // thread through a condition variable at once.
  cfg.set("scheduler.policy", caf::atom("sharing"));
  cfg.set("middleman.heartbeat-interval", caf::timespan{s.heartbeat});
  cfg.set("middleman.connection-timeout", caf::timespan{s.connection_timeout});
  cfg.set("middleman.app-identifiers", std::vector<std::string>{app_identifier(cfg)});
  cfg.set("logger.verbosity", caf::atom("quiet"));
  if (s.tls.enabled()) {
    // Certificate + key + CA on both ends: CAF's openssl module then asks for and verifies
    // the peer's certificate (mutual authentication); without them it would fall back to
    // an anonymous cipher, encrypted but unauthenticated, which Monkey never uses.
    cfg.openssl_certificate = s.tls.cert;
    cfg.openssl_key = s.tls.key;
    cfg.openssl_cafile = s.tls.ca;
    static volatile int keep = tls_hygiene_installed();
    (void) keep;
    cfg.load<caf::openssl::manager>();
  }
}

bool tls_enabled(caf::actor_system& sys) {
  return sys.has_openssl_manager();
}

caf::io::middleman_actor connector(caf::actor_system& sys) {
  if (sys.has_openssl_manager())
    return sys.openssl_manager().actor_handle();
  return sys.middleman().actor_handle();
}

caf::expected<uint16_t> publish_actor(const caf::actor& whom, uint16_t port,
                                      const std::string& host) {
  const char* in = host.empty() || host == "0.0.0.0" ? nullptr : host.c_str();
  if (whom && whom.home_system().has_openssl_manager())
    return caf::openssl::publish(whom, port, in, true);
  return publish_guarded(whom, port, in);
}

void unpublish_actor(const caf::actor& whom, uint16_t port) {
  if (!whom)
    return;
  auto& sys = whom.home_system();
  caf::anon_send(connector(sys), caf::unpublish_atom::value, whom.address(), port);
}

caf::expected<caf::actor> connect_actor(caf::actor_system& sys, const std::string& host,
                                        uint16_t port, std::chrono::milliseconds timeout) {
  // Asked of the middleman actor with a timeout: CAF's blocking remote_actor() has none, and
  // waits forever for a node that accepted the TCP connection but is frozen.
  //
  // CAF 0.17 starts an outgoing connection's heartbeat clock at zero (basp_broker's
  // connect handler default-constructs the endpoint's last_seen), so its next heartbeat
  // tick (every 250 ms) fails the connection with `connection_timeout` unless the node's
  // handshake has arrived by then. A node that is merely busy for a moment would so
  // refuse a client at once; within the caller's deadline that error is tried again.
  //
  // At the deadline the attempt is abandoned (request_timeout) while CAF may still hold its
  // half-open connection; CAF's own heartbeat closes it within two ticks
  // (connect_settle_time). A process that exits before then leaks it: client::impl waits.
  using clock = std::chrono::steady_clock;
  auto deadline = clock::now() + timeout;
  caf::scoped_actor self{sys};
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    caf::expected<caf::actor> out{caf::sec::request_timeout};
    if (left.count() <= 0)
      return out;
    self->request(connector(sys), left, caf::connect_atom::value, host, port)
      .receive(
        [&](const caf::node_id&, caf::strong_actor_ptr& ptr, const std::set<std::string>&) {
          if (ptr)
            out = caf::actor_cast<caf::actor>(ptr);
          else
            out = caf::sec::no_actor_published_at_port;
        },
        [&](caf::error& err) { out = std::move(err); });
    if (out || out.error() != caf::sec::connection_timeout)
      return out;
    if (deadline - clock::now() < std::chrono::milliseconds(50))
      return out;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::chrono::milliseconds connect_settle_time(const caf::actor_system& sys) {
  auto heartbeat = std::chrono::duration_cast<std::chrono::milliseconds>(
    caf::get_or(sys.config(), "middleman.heartbeat-interval", caf::timespan{250'000'000}));
  return 2 * heartbeat + std::chrono::milliseconds(100);
}

std::string describe_connect_error(caf::actor_system& sys, const caf::error& err,
                                   const std::string& address) {
  return explain_connect_error(sys, err, address).text;
}

namespace {

std::string connect_error_text(caf::actor_system& sys, const caf::error& err,
                               const std::string& address) {
  if (err == caf::sec::request_timeout || err == caf::sec::connection_timeout)
    return "the node at " + address
           + " did not complete the connection in time (frozen, overloaded, or not a Monkey "
             "node)";
  if (err == caf::sec::incompatible_application_ids)
    return "the node at " + address + " runs another Monkey protocol version or message set "
           + "(ours: " + app_identifier(sys.config()) + ")";
  if (err == caf::sec::cannot_connect_to_node)
    return "cannot reach a node at " + address
           + " (connection failed: is monkey-runtime running there?)";
  if (sys.has_openssl_manager() && err == caf::sec::disconnect_during_handshake)
    return "the TLS handshake with " + address
           + " failed: it does not speak TLS, or its certificate is not signed by our CA "
             "(or ours not by its CA)";
  if (err == caf::sec::disconnect_during_handshake)
    return "the node at " + address
           + " closed the connection during the handshake: it may run with --tls (then "
             "use --tls here too) or speak another protocol version";
  return "cannot reach a node at " + address + " (" + caf::to_string(err) + ")";
}

} // namespace

connect_failure explain_connect_error(caf::actor_system& sys, const caf::error& err,
                                      const std::string& address) {
  connect_failure f;
  if (sys.has_openssl_manager() && err == caf::sec::cannot_connect_to_node) {
    // CAF says only "cannot connect"; the TLS layer knows whether the handshake failed.
    if (auto why = take_tls_failure(); !why.empty()) {
      f.text = "the TLS handshake with " + address + " failed (" + why
               + "): its certificate is not signed by our CA (or ours not by its CA), or it "
                 "does not speak TLS";
      return f;
    }
  }
  f.refused = err == caf::sec::cannot_connect_to_node;
  f.text = connect_error_text(sys, err, address);
  return f;
}

status check_network_config(const caf::actor_system_config& cfg) {
  auto hb = caf::get_or(cfg, "middleman.heartbeat-interval", caf::timespan{0});
  auto to = caf::get_or(cfg, "middleman.connection-timeout", caf::timespan{0});
  if (hb.count() == 0)
    return failure{"middleman.heartbeat-interval is 0: heartbeats would be off and frozen peers "
           "never detected"};
  if (to.count() == 0 || to <= hb)
    return failure{"middleman.connection-timeout must be larger than the heartbeat interval"};
  return {};
}

status split_address(const std::string& address, std::string& host, uint16_t& port) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size())
    return failure{"address '" + address + "' is not HOST:PORT"};
  host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  auto p = address.substr(colon + 1);
  char* end = nullptr;
  long v = std::strtol(p.c_str(), &end, 10);
  if (*end != '\0' || v < 0 || v > 65535)
    return failure{"address '" + address + "' has a bad port '" + p + "'"};
  port = static_cast<uint16_t>(v);
  return {};
}

} // namespace monkey
