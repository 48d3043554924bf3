// SPDX-License-Identifier: Apache-2.0
#include "runtime/net_config.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "runtime/envelope.hpp"
#include "runtime/errc.hpp"
#include "runtime/messages/client.hpp"

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
  }
  return "unknown";
}

caf::error make_error(errc code, std::string message) {
  return caf::error{static_cast<uint8_t>(code), caf::atom("monkey"),
                    caf::make_message(std::move(message))};
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

void apply_network_config(caf::actor_system_config& cfg, const net_settings& s) {
  cfg.load<caf::io::middleman>();
  cfg.add_message_type<envelope>("monkey.envelope");
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
  cfg.set("middleman.app-identifiers",
          std::vector<std::string>{"monkey-v" + std::to_string(protocol_version)});
  cfg.set("logger.verbosity", caf::atom("quiet"));
}

std::string check_network_config(const caf::actor_system_config& cfg) {
  auto hb = caf::get_or(cfg, "middleman.heartbeat-interval", caf::timespan{0});
  auto to = caf::get_or(cfg, "middleman.connection-timeout", caf::timespan{0});
  if (hb.count() == 0)
    return "middleman.heartbeat-interval is 0: heartbeats would be off and frozen peers "
           "never detected";
  if (to.count() == 0 || to <= hb)
    return "middleman.connection-timeout must be larger than the heartbeat interval";
  return {};
}

std::string split_address(const std::string& address, std::string& host, uint16_t& port) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size())
    return "address '" + address + "' is not HOST:PORT";
  host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  auto p = address.substr(colon + 1);
  char* end = nullptr;
  long v = std::strtol(p.c_str(), &end, 10);
  if (*end != '\0' || v < 0 || v > 65535)
    return "address '" + address + "' has a bad port '" + p + "'";
  port = static_cast<uint16_t>(v);
  return {};
}

} // namespace monkey
