// SPDX-License-Identifier: Apache-2.0
#include "actors/gateway/gateway.hpp"

#include <cstring>
#include <map>
#include <set>

#include <caf/all.hpp>

#include "actors/gateway/access.hpp"
#include "actors/membership/membership.hpp"
#include "runtime/wire/atoms.hpp"
#include "runtime/net/auth.hpp"
#include "runtime/wire/envelope.hpp"
#include "runtime/errc.hpp"
#include "runtime/logging.hpp"
#include "runtime/wire/messages/client.hpp"

namespace monkey {

namespace {

/// Bounds on what one node keeps for sessions that have not authenticated.
constexpr size_t max_pending_challenges = 4096;

struct challenge {
  std::string nonce;
  role claimed = role::client;
  std::string attempt;
};

struct gateway_state {
  std::string secret;
  std::string node_key;
  std::string client_token;
  std::string node;
  std::map<std::string, caf::actor> cached; ///< path → actor (cleared when it goes down)
  std::map<caf::actor_addr, challenge> challenges;
  std::map<caf::actor_addr, challenge> sessions; ///< role and (app) attempt proven
  std::shared_ptr<spdlog::logger> log;
  static inline const char* name = "gateway";
};

using gateway_actor = caf::stateful_actor<gateway_state>;

caf::actor lookup(caf::local_actor* self, const char* name) {
  return caf::actor_cast<caf::actor>(self->system().registry().get(
    caf::atom_from_string(caf::string_view{name, std::strlen(name)}))); // clang: see register_as
}

std::string key_of(const gateway_state& st, const challenge& c) {
  switch (c.claimed) {
    case role::node: return st.node_key;
    case role::app: return attempt_key(st.node_key, c.attempt);
    default: return st.client_token;
  }
}

caf::result<std::string> on_hello(gateway_actor* self, const caf::actor_addr& sender,
                                  const envelope& env) {
  auto& st = self->state;
  auto req = decode<hello_request>(env.body, "hello");
  if (!req)
    return make_error(errc::bad_request, req.error());
  if (req->protocol != protocol_version)
    return make_error(errc::refused, "protocol version mismatch: client speaks "
                                       + std::to_string(req->protocol) + ", node speaks "
                                       + std::to_string(protocol_version));
  auto r = parse_role(req->role);
  if (!r)
    return make_error(errc::bad_request, "hello: unknown role '" + req->role
                                           + "' (client, node or app)");
  if (*r == role::app && req->attempt.empty())
    return make_error(errc::bad_request, "hello: an app session names its attempt");
  if (st.challenges.size() >= max_pending_challenges)
    return make_error(errc::busy, "too many unauthenticated clients; try again");
  hello_reply reply;
  reply.nonce = make_nonce();
  reply.node = st.node;
  if (!st.challenges.count(sender) && !st.sessions.count(sender))
    self->monitor(sender);
  st.sessions.erase(sender); // a new handshake starts a new session
  st.challenges[sender] = challenge{reply.nonce, *r, req->attempt};
  return encode(reply);
}

caf::result<std::string> on_auth(gateway_actor* self, const caf::actor_addr& sender,
                                 const envelope& env) {
  auto& st = self->state;
  auto req = decode<auth_request>(env.body, "auth");
  if (!req)
    return make_error(errc::bad_request, req.error());
  auto it = st.challenges.find(sender);
  if (it == st.challenges.end())
    return make_error(errc::refused, "authentication refused: no challenge was issued to this "
                                     "client (send hello first)");
  auto c = it->second;
  st.challenges.erase(it);
  auto key = key_of(st, c);
  if (req->client_nonce.size() < 16
      || !equal_digest(req->proof, client_proof(key, c.nonce, req->client_nonce, req->user))) {
    st.log->warn("refused {} session {}@{}: wrong key", to_string(c.claimed), req->user,
                 req->host);
    return make_error(errc::refused,
                      std::string("authentication failed: the ") + to_string(c.claimed)
                        + " does not know this cluster's "
                        + (c.claimed == role::client
                             ? "token (check --token-file / MONKEY_TOKEN_FILE, or the secret "
                               "file it is derived from)"
                             : "secret (check --secret-file / MONKEY_SECRET_FILE)"));
  }
  st.sessions[sender] = c;
  SPDLOG_LOGGER_DEBUG(st.log, "{} {}@{} authenticated", to_string(c.claimed), req->user,
                      req->host);
  return encode(auth_reply{server_proof(key, c.nonce, req->client_nonce)});
}

/// Passes `env` to the actor at `path` under the root supervisor (cached while it lives).
caf::result<std::string> pass_to(gateway_actor* self, const char* path, const envelope& env) {
  auto& st = self->state;
  if (auto it = st.cached.find(path); it != st.cached.end()) {
    self->delegate(it->second, env);
    return caf::delegated<std::string>{};
  }
  auto root = lookup(self, root_supervisor_name);
  if (!root)
    return make_error(errc::busy, "the node's supervision tree is not running");
  auto rp = self->make_response_promise<std::string>();
  std::string p = path;
  self->request(root, std::chrono::seconds(10), atoms::which::value, p)
    .then(
      [=](const caf::actor& target) mutable {
        self->state.cached[p] = target;
        self->monitor(target);
        self->request(target, caf::infinite, env)
          .then([=](std::string& body) mutable { rp.deliver(std::move(body)); },
                [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
      },
      [=](caf::error&) mutable {
        rp.deliver(make_error(errc::busy, p + " is restarting; try again"));
      });
  return rp;
}

/// An app host's verb goes on with the attempt its session proved, whatever it claims.
template <class Request>
caf::result<std::string> with_attempt(gateway_actor* self, const envelope& env,
                                      const std::string& attempt) {
  auto req = decode<Request>(env.body, to_string(static_cast<verb>(env.verb)));
  if (!req)
    return make_error(errc::bad_request, req.error());
  req->attempt = attempt;
  return pass_to(self, coordinator_path, envelope{env.verb, encode(*req)});
}

caf::result<std::string> pass_app_verb(gateway_actor* self, const envelope& env,
                                       const std::string& attempt) {
  if (static_cast<verb>(env.verb) == verb::app_report)
    return with_attempt<app_report_request>(self, env, attempt);
  if (static_cast<verb>(env.verb) == verb::app_checkpoint)
    return with_attempt<app_checkpoint_request>(self, env, attempt);
  return with_attempt<app_ready_request>(self, env, attempt);
}

caf::behavior gateway_impl(gateway_actor* self, std::string secret, std::string node) {
  auto& st = self->state;
  st.secret = std::move(secret);
  st.node_key = node_key(st.secret);
  st.client_token = client_token(st.secret);
  st.node = std::move(node);
  st.log = logger("gateway");
  self->set_down_handler([=](const caf::down_msg& dm) {
    auto& st = self->state;
    for (auto it = st.cached.begin(); it != st.cached.end();)
      if (it->second.address() == dm.source)
        it = st.cached.erase(it);
      else
        ++it;
    st.challenges.erase(dm.source);
    st.sessions.erase(dm.source);
  });
  return {
    [=](const envelope& env) -> caf::result<std::string> {
      auto& st = self->state;
      auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
      if (!sender)
        return make_error(errc::refused, "anonymous messages are not accepted");
      auto v = static_cast<verb>(env.verb);
      if (v == verb::hello)
        return on_hello(self, sender, env);
      if (v == verb::auth)
        return on_auth(self, sender, env);
      if (std::string(to_string(v)) == "unknown")
        return make_error(errc::bad_request, "unknown verb " + std::to_string(env.verb));
      auto session = st.sessions.find(sender);
      if (session == st.sessions.end())
        return make_error(errc::unauthenticated,
                          "not authenticated: prove the cluster secret first");
      if (!verb_allowed(session->second.claimed, v)) {
        st.log->warn("refused verb {} from a {} session", to_string(v),
                     to_string(session->second.claimed));
        auto who = std::string(to_string(session->second.claimed));
        return make_error(errc::refused, std::string("verb '") + to_string(v)
                                           + "' is not allowed for a" + (who == "app" ? "n " : " ")
                                           + who + " session");
      }
      switch (route_of(v)) {
        case destination::membership: {
          auto members = lookup(self, membership_name);
          if (!members)
            return make_error(errc::busy, "the membership actor is restarting; try again");
          self->delegate(members, env);
          return caf::delegated<std::string>{};
        }
        case destination::root: {
          auto root = lookup(self, root_supervisor_name);
          if (!root)
            return make_error(errc::busy, "the node's supervision tree is not running");
          if (v == verb::tree) {
            self->delegate(root, atoms::tree::value);
            return caf::delegated<std::string>{};
          }
          auto path = decode<std::string>(env.body, "kill");
          if (!path)
            return make_error(errc::bad_request, path.error());
          self->delegate(root, atoms::kill::value, *path);
          return caf::delegated<std::string>{};
        }
        case destination::tasks:
          return pass_to(self, tasks_path, env);
        case destination::coordinator:
          if (v == verb::app_report || v == verb::app_ready || v == verb::app_checkpoint)
            return pass_app_verb(self, env, session->second.attempt);
          return pass_to(self, coordinator_path, env);
        case destination::router:
          return pass_to(self, router_path, env);
        case destination::checkpoints:
          return pass_to(self, checkpoints_path, env);
        case destination::gateway:
          break;
      }
      return make_error(errc::bad_request, "unknown verb " + std::to_string(env.verb));
    },
  };
}

// ---- the front ---------------------------------------------------------------------------

struct front_state {
  caf::actor gateway;
  caf::actor root; ///< the front stops with the node's root supervisor
  static inline const char* name = "front";
};

using front_actor = caf::stateful_actor<front_state>;

/// Finds the current gateway under the root supervisor (again every 50 ms until found).
void find_gateway(front_actor* self) {
  auto root = lookup(self, root_supervisor_name);
  auto again = [=] {
    self->delayed_send(self, std::chrono::milliseconds(50), atoms::discover::value);
  };
  if (!root)
    return again();
  self->request(root, std::chrono::seconds(5), atoms::which::value, std::string("gateway"))
    .then(
      [=](const caf::actor& gw) {
        self->state.gateway = gw;
        self->monitor(gw);
      },
      [=](caf::error&) { again(); });
}

caf::behavior front_impl(front_actor* self) {
  self->set_down_handler([=](const caf::down_msg& dm) {
    if (self->state.root && self->state.root.address() == dm.source)
      return self->quit(dm.reason);
    if (self->state.gateway && self->state.gateway.address() == dm.source) {
      self->state.gateway = nullptr;
      find_gateway(self);
    }
  });
  return {
    [=](const envelope& env) -> caf::result<std::string> {
      // Delegated: the gateway sees the client as the sender (it knows sessions by their
      // address), and its answer goes straight back to the client.
      if (self->state.gateway) {
        self->delegate(self->state.gateway, env);
        return caf::delegated<std::string>{};
      }
      return make_error(errc::busy, "the gateway is restarting; try again");
    },
    [=](atoms::discover) {
      if (!self->state.gateway)
        find_gateway(self);
    },
    [=](atoms::which) { return static_cast<bool>(self->state.gateway); },
    [=](atoms::subscribe, const caf::actor& root) {
      self->state.root = root;
      self->monitor(root);
      find_gateway(self);
    },
  };
}

} // namespace

caf::actor spawn_gateway(caf::actor_system& sys, std::string secret, std::string node) {
  return sys.spawn(gateway_impl, std::move(secret), std::move(node));
}

caf::actor spawn_front(caf::actor_system& sys) {
  return sys.spawn(front_impl);
}

} // namespace monkey
