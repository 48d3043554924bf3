// SPDX-License-Identifier: Apache-2.0
#include "actors/gateway.hpp"
#include "actors/membership.hpp"

#include <map>
#include <set>

#include <caf/all.hpp>

#include "runtime/atoms.hpp"
#include "runtime/auth.hpp"
#include "runtime/envelope.hpp"
#include "runtime/errc.hpp"
#include "runtime/logging.hpp"
#include "runtime/messages/client.hpp"

namespace monkey {

namespace {

/// Bounds on what one node keeps for clients that have not authenticated.
constexpr size_t max_pending_challenges = 4096;

struct gateway_state {
  std::string secret;
  std::string node;
  caf::actor coordinator; ///< cached; cleared when it goes down
  std::map<caf::actor_addr, std::string> challenges; ///< client → nonce sent
  std::set<caf::actor_addr> authenticated;
  std::shared_ptr<spdlog::logger> log;
  static inline const char* name = "gateway";
};

using gateway_actor = caf::stateful_actor<gateway_state>;

caf::actor lookup(gateway_actor* self, const char* name) {
  return caf::actor_cast<caf::actor>(self->system().registry().get(caf::atom_from_string(name)));
}

caf::behavior gateway_impl(gateway_actor* self, std::string secret, std::string node) {
  auto& st = self->state;
  st.secret = std::move(secret);
  st.node = std::move(node);
  st.log = logger("gateway");
  self->set_down_handler([=](const caf::down_msg& dm) {
    if (self->state.coordinator && self->state.coordinator.address() == dm.source)
      self->state.coordinator = nullptr;
    self->state.challenges.erase(dm.source);
    self->state.authenticated.erase(dm.source);
  });
  return {
    [=](const envelope& env) -> caf::result<std::string> {
      auto& st = self->state;
      auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
      if (!sender)
        return make_error(errc::refused, "anonymous messages are not accepted");
      switch (static_cast<verb>(env.verb)) {
        case verb::hello: {
          auto req = decode<hello_request>(env.body, "hello");
          if (!req)
            return make_error(errc::bad_request, req.error());
          if (req->protocol != protocol_version)
            return make_error(errc::refused, "protocol version mismatch: client speaks "
                                               + std::to_string(req->protocol) + ", node speaks "
                                               + std::to_string(protocol_version));
          if (st.challenges.size() >= max_pending_challenges)
            return make_error(errc::busy, "too many unauthenticated clients; try again");
          hello_reply r;
          r.nonce = make_nonce();
          r.node = st.node;
          if (!st.challenges.count(sender) && !st.authenticated.count(sender))
            self->monitor(sender);
          st.challenges[sender] = r.nonce;
          return encode(r);
        }
        case verb::auth: {
          auto req = decode<auth_request>(env.body, "auth");
          if (!req)
            return make_error(errc::bad_request, req.error());
          auto it = st.challenges.find(sender);
          if (it == st.challenges.end())
            return make_error(errc::refused, "authentication refused: no challenge was issued "
                                             "to this client (send hello first)");
          auto nonce = it->second;
          st.challenges.erase(it);
          if (req->client_nonce.size() < 16
              || !equal_digest(req->proof,
                               client_proof(st.secret, nonce, req->client_nonce, req->user))) {
            st.log->warn("refused client {}@{}: wrong cluster secret", req->user, req->host);
            return make_error(errc::refused,
                              "authentication failed: the client does not know this cluster's "
                              "secret (check --secret-file / MONKEY_SECRET_FILE)");
          }
          st.authenticated.insert(sender);
          SPDLOG_LOGGER_DEBUG(st.log, "client {}@{} authenticated", req->user, req->host);
          return encode(auth_reply{server_proof(st.secret, nonce, req->client_nonce)});
        }
        case verb::nodes:
        case verb::peer_join:
        case verb::peer_ping:
        case verb::peer_ping_req: {
          if (!st.authenticated.count(sender))
            return make_error(errc::unauthenticated,
                              "not authenticated: prove the cluster secret first");
          auto members = lookup(self, membership_name);
          if (!members)
            return make_error(errc::busy, "the membership actor is restarting; try again");
          self->delegate(members, env);
          return caf::delegated<std::string>{};
        }
        case verb::tree:
        case verb::kill_actor: {
          if (!st.authenticated.count(sender))
            return make_error(errc::unauthenticated,
                              "not authenticated: prove the cluster secret first");
          auto root = lookup(self, root_supervisor_name);
          if (!root)
            return make_error(errc::busy, "the node's supervision tree is not running");
          if (static_cast<verb>(env.verb) == verb::tree) {
            self->delegate(root, atoms::tree::value);
            return caf::delegated<std::string>{};
          }
          auto path = decode<std::string>(env.body, "kill");
          if (!path)
            return make_error(errc::bad_request, path.error());
          self->delegate(root, atoms::kill::value, *path);
          return caf::delegated<std::string>{};
        }
        default: {
          if (!st.authenticated.count(sender))
            return make_error(errc::unauthenticated,
                              "not authenticated: prove the cluster secret first");
          if (st.coordinator) {
            self->delegate(st.coordinator, env);
            return caf::delegated<std::string>{};
          }
          auto root = lookup(self, root_supervisor_name);
          if (!root)
            return make_error(errc::busy, "the node's supervision tree is not running");
          auto rp = self->make_response_promise<std::string>();
          self->request(root, std::chrono::seconds(10), atoms::which::value,
                        std::string(coordinator_path))
            .then(
              [=](const caf::actor& coordinator) mutable {
                self->state.coordinator = coordinator;
                self->monitor(coordinator);
                self->request(coordinator, caf::infinite, env)
                  .then([=](std::string& body) mutable { rp.deliver(std::move(body)); },
                        [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
              },
              [=](caf::error&) mutable {
                rp.deliver(make_error(errc::busy, "the coordinator is restarting; try again"));
              });
          return rp;
        }
      }
    },
  };
}

} // namespace

caf::actor spawn_gateway(caf::actor_system& sys, std::string secret, std::string node) {
  return sys.spawn(gateway_impl, std::move(secret), std::move(node));
}

} // namespace monkey
