// SPDX-License-Identifier: Apache-2.0
#include "actors/membership/membership.hpp"
#include "actors/messages.hpp"

#include <algorithm>
#include <functional>
#include <optional>
#include <map>
#include <random>
#include <set>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "runtime/wire/atoms.hpp"
#include "runtime/net/auth.hpp"
#include "runtime/wire/envelope.hpp"
#include "runtime/errc.hpp"
#include "runtime/logging.hpp"
#include "runtime/wire/messages/client.hpp"
#include "runtime/net/net.hpp"
#include "runtime/net/net_config.hpp"
#include "runtime/supervision/supervisor.hpp"

namespace monkey {

namespace {

constexpr size_t max_piggyback = 8;

/// A connection to another node's gateway, authenticated with the cluster secret.
struct peer_link {
  caf::actor gateway;
  bool ready = false;
  std::vector<std::function<void(const caf::actor&, const caf::error&)>> waiting;
};

struct membership_state {
  membership_config cfg;
  std::unique_ptr<member_table> table;
  std::map<std::string, peer_link> links; ///< by address
  std::set<std::string> probing;          ///< node ids with a probe in flight
  std::vector<std::string> order;         ///< probe order, reshuffled every round
  size_t next = 0;
  uint64_t ticks = 0;
  int64_t last_tick_ms = 0;
  int64_t unreliable_until = 0; ///< probes started before this do not count (a pause)
  bool joined = false;
  int64_t last_join_try = 0;
  std::map<std::string, std::string> join_problems; ///< seed → last problem logged
  std::mt19937_64 rng{std::random_device{}()};
  std::vector<caf::actor> subscribers;
  uint64_t told = 0; ///< the table's change count last sent to subscribers
  bool fencing = false;           ///< declared dead: the subscribers stop their jobs first
  std::optional<member> rumour;   ///< the death news, refuted once fencing is done
  uint64_t fenced_inc = 0;        ///< death news below this incarnation is refuted at once
  std::shared_ptr<spdlog::logger> log;
  static inline const char* name = "membership";
};

using membership_actor = caf::stateful_actor<membership_state>;

/// The updates a message carries: the least-sent ones, and always this node's own
/// record. A refutation is then never lost because its sends were used up by answers to
/// requests that had already timed out (as after a SIGSTOP, when the queued pings of the
/// others are answered all at once).
std::vector<member> outgoing(member_table& table) {
  auto out = table.piggyback(max_piggyback);
  bool has_self = false;
  for (auto& m : out)
    has_self = has_self || m.node == table.self_id();
  if (!has_self)
    out.push_back(table.self());
  return out;
}

/// True when a failure of something asked at `started` says nothing about the others:
/// this node was paused then (its own tick ran late), or is paused right now.
bool unreliable(const membership_state& st, int64_t started) {
  auto now = now_ms();
  bool overdue = st.last_tick_ms != 0
                 && now - st.last_tick_ms > st.cfg.probe_interval.count() + 1000;
  return overdue || started < st.unreliable_until;
}

envelope wrap(verb v, std::string body) {
  return envelope{static_cast<uint16_t>(v), std::move(body)};
}


/// Sends the whole table to every subscriber when it changed since the last time.
void notify(membership_actor* self) {
  auto& st = self->state;
  if (st.table->changes() == st.told)
    return;
  st.told = st.table->changes();
  auto all = st.table->all();
  bool majority = st.table->has_majority();
  auto agreed = static_cast<uint32_t>(st.table->agreed().size());
  auto agreed_alive = static_cast<uint32_t>(st.table->agreed_alive());
  for (auto& s : st.subscribers)
    self->send(s, atoms::members::value, all, majority, agreed, agreed_alive);
}

/// Logs state changes of other members once, as this node learns them.
void log_update(membership_actor* self, const member* before, const member& after) {
  if (after.node == self->state.table->self_id())
    return;
  if (before && before->state == after.state && before->incarnation == after.incarnation)
    return;
  self->state.log->info("member {} at {} is {} (incarnation {}){}", after.node, after.address,
                        to_string(after.state), incarnation_text(after.incarnation),
                        after.reason.empty() ? "" : ": " + after.reason);
}

void apply_updates(membership_actor* self, const std::vector<member>& updates);
void tell_verdict(membership_actor* self, const member& target, const member& verdict);

/// This node was declared dead by the others: before it refutes (and so rejoins with a new
/// incarnation), its subscribers (the coordinator) stop every job process it runs, since
/// the surviving holders have adopted those jobs. Fencing: docs/cluster.md.
void fence(membership_actor* self, const member& news) {
  auto& st = self->state;
  if (!st.rumour || st.rumour->incarnation < news.incarnation)
    st.rumour = news;
  if (st.fencing)
    return;
  st.fencing = true;
  st.log->warn("this node was declared dead ({}): stopping its jobs before it rejoins",
               news.reason);
  auto pending = std::make_shared<size_t>(st.subscribers.size());
  auto done = [=]() {
    if (*pending > 0 && --*pending > 0)
      return;
    auto& st = self->state;
    st.fencing = false;
    auto rumour = *st.rumour;
    st.rumour.reset();
    st.fenced_inc = rumour.incarnation + 1;
    st.table->apply(rumour, now_ms()); // the refutation: a new incarnation
    st.log->warn("jobs stopped; rejoining as incarnation {}",
                 incarnation_text(st.table->self().incarnation));
    notify(self);
  };
  if (st.subscribers.empty())
    return done();
  for (auto& s : st.subscribers)
    self->request(s, std::chrono::seconds(30), atoms::fence::value, news.reason)
      .then([=](bool) { done(); },
            [=](const caf::error& err) {
              self->state.log->error("fencing: {}", describe(err));
              done();
            });
}

void apply_updates(membership_actor* self, const std::vector<member>& updates) {
  auto& st = self->state;
  auto now = now_ms();
  for (auto& m : updates) {
    // A death verdict about this very runtime (same start), not yet fenced for: even if
    // this node has refuted a suspicion since, the others adopted its jobs.
    if (m.node == st.table->self_id() && m.state == member_state::dead
        && (m.incarnation >> 32) == (st.table->self().incarnation >> 32)
        && m.incarnation >= st.fenced_inc && st.table->self().state != member_state::left) {
      fence(self, m);
      continue;
    }
    auto* before = st.table->find(m.node);
    auto old = before ? std::optional<member>(*before) : std::nullopt;
    if (st.table->apply(m, now)) {
      if (m.node == st.table->self_id())
        st.log->warn("refuted a rumour that this node is {} (now incarnation {})",
                     to_string(m.state), incarnation_text(st.table->self().incarnation));
      else
        log_update(self, old ? &*old : nullptr, *st.table->find(m.node));
      // Back from the dead by a refutation (same runtime start): it may not know it was
      // declared dead and its jobs adopted. Tell it, so it fences.
      if (m.node != st.table->self_id() && old && old->state == member_state::dead
          && m.state == member_state::alive && (old->incarnation >> 32) == (m.incarnation >> 32))
        tell_verdict(self, m, *old);
    }
  }
  notify(self);
}

/// Connects to and authenticates with the gateway at `address`, then calls `then` with
/// it (or with a null actor and the problem).
void with_link(membership_actor* self, const std::string& address,
               std::function<void(const caf::actor&, const caf::error&)> then) {
  auto& st = self->state;
  auto& link = st.links[address];
  if (link.ready) {
    then(link.gateway, {});
    return;
  }
  link.waiting.push_back(std::move(then));
  if (link.waiting.size() > 1)
    return; // a connection attempt is under way
  auto finish = [=](const caf::actor& gw, const caf::error& problem) {
    auto& st = self->state;
    auto it = st.links.find(address);
    if (it == st.links.end())
      return;
    auto waiting = std::move(it->second.waiting);
    if (gw) {
      it->second.gateway = gw;
      it->second.ready = true;
      self->monitor(gw);
    } else {
      st.links.erase(it);
    }
    for (auto& w : waiting)
      w(gw, problem);
  };
  std::string host;
  uint16_t port = 0;
  if (auto bad = split_address(address, host, port); !bad)
    return finish(nullptr, make_error(errc::bad_request, bad.error()));
  auto mm = connector(self->system());
  auto key = node_key(st.cfg.secret);
  auto user = "node:" + st.table->self_id();
  auto timeout = st.cfg.connect_timeout;
  self->request(mm, timeout, caf::connect_atom::value, host, port)
    .then(
      [=](const caf::node_id&, caf::strong_actor_ptr& ptr, const std::set<std::string>&) {
        if (!ptr)
          return finish(nullptr, make_error(errc::unreachable, "nothing is published at " + address));
        auto gw = caf::actor_cast<caf::actor>(ptr);
        hello_request hello;
        hello.role = "node";
        self->request(gw, timeout, wrap(verb::hello, encode(hello)))
          .then(
            [=](const std::string& body) {
              auto h = decode<hello_reply>(body, "hello");
              if (!h)
                return finish(nullptr, make_error(errc::unreachable, h.error()));
              auth_request a;
              a.client_nonce = make_nonce();
              a.user = user;
              a.host = self->state.table->self().address;
              a.proof = client_proof(key, h->nonce, a.client_nonce, a.user);
              auto nonce = h->nonce;
              auto client_nonce = a.client_nonce;
              self->request(gw, timeout, wrap(verb::auth, encode(a)))
                .then(
                  [=](const std::string& body) {
                    auto p = decode<auth_reply>(body, "auth");
                    if (!p || !equal_digest(p->proof, server_proof(key, nonce, client_nonce)))
                      return finish(nullptr,
                                    make_error(errc::refused,
                                               "the node at " + address
                                                 + " could not prove it knows the cluster secret"));
                    finish(gw, {});
                  },
                  [=](const caf::error& err) { finish(nullptr, err); });
            },
            [=](const caf::error& err) { finish(nullptr, err); });
      },
      [=](const caf::error& err) {
        auto why = explain_connect_error(self->system(), err, address);
        finish(nullptr, why.refused ? make_error(errc::connection_refused, "connection refused")
                                    : make_error(errc::unreachable, "cannot connect: " + why.text));
      });
}

bool unauthenticated(const caf::error& err) {
  return is(err, errc::unauthenticated);
}

/// One request to the node at `address` over the authenticated link; when the peer no
/// longer knows the session (its gateway was restarted), the link is authenticated again
/// and the request sent once more. `ok` or `fail` runs once.
void ask_peer(membership_actor* self, const std::string& address, envelope env,
              std::chrono::milliseconds timeout, std::function<void(std::string&)> ok,
              std::function<void(const caf::error&, const std::string&)> fail,
              bool again = false) {
  with_link(self, address, [=](const caf::actor& gw, const caf::error& problem) {
    if (!gw)
      return fail(problem, describe(problem));
    self->request(gw, timeout, env)
      .then([=](std::string& body) { ok(body); },
            [=](const caf::error& err) {
              if (!again && unauthenticated(err)) {
                self->state.links.erase(address);
                return ask_peer(self, address, env, timeout, ok, fail, true);
              }
              fail(err, describe(err));
            });
  });
}

void tell_verdict(membership_actor* self, const member& target, const member& verdict) {
  peer_ping_request req;
  req.from = self->state.table->self_id();
  req.to = target.node;
  req.updates = {verdict};
  ask_peer(self, target.address, wrap(verb::peer_ping, encode(req)),
           self->state.cfg.ping_timeout * 5, [](std::string&) {},
           [](const caf::error&, const std::string&) {});
}

/// A probe that failed to connect: refused confirms the death, anything else suspects.
void connect_failed(membership_actor* self, const std::string& node, const caf::error& problem,
                    const std::string& context) {
  auto& st = self->state;
  auto now = now_ms();
  auto* before = st.table->find(node);
  auto old = before ? std::optional<member>(*before) : std::nullopt;
  bool changed = is(problem, errc::connection_refused)
                   ? st.table->declare_dead(node, context + ": connection refused", now)
                   : st.table->suspect(node, context + ": " + describe(problem), now);
  if (changed) {
    log_update(self, old ? &*old : nullptr, *st.table->find(node));
    notify(self);
  }
}

void ping(membership_actor* self, const member& target,
          std::function<void(bool ok, const caf::error& problem)> done) {
  auto& st = self->state;
  peer_ping_request req;
  req.from = st.table->self_id();
  req.to = target.node;
  req.updates = outgoing(*st.table);
  // What this node believes of the target: if that is suspect or dead, it refutes, and its
  // ack carries its new incarnation.
  if (auto* view = st.table->find(target.node); view && view->state != member_state::alive)
    req.updates.push_back(*view);
  ask_peer(
    self, target.address, wrap(verb::peer_ping, encode(req)), st.cfg.ping_timeout,
    [=](std::string& body) {
      auto ack = decode<peer_ack>(body, "peer ack");
      if (!ack)
        return done(false, make_error(errc::bad_request, ack.error()));
      apply_updates(self, ack->updates);
      done(true, {});
    },
    [=](const caf::error& err, const std::string&) { done(false, err); });
}

/// One SWIM probe of `node`: ping; if no ack, ping-req through others; else suspect.
void probe(membership_actor* self, const std::string& node) {
  auto& st = self->state;
  auto* m = st.table->find(node);
  if (!m || st.probing.count(node))
    return;
  st.probing.insert(node);
  auto target = *m;
  auto started = now_ms();
  ping(self, target, [=](bool ok, const caf::error& problem) {
    auto& st = self->state;
    if (ok || unreliable(st, started)) {
      st.probing.erase(node); // answered, or asked while this node was paused
      return;
    }
    if (is(problem, errc::connection_refused) || is(problem, errc::unreachable)) {
      st.probing.erase(node);
      return connect_failed(self, node, problem, "probe");
    }
    // Indirect: ask up to k other members with a live connection to probe it for us.
    std::vector<caf::actor> helpers;
    for (auto& id : st.table->probe_targets()) {
      if (id == node)
        continue;
      auto* h = st.table->find(id);
      auto it = st.links.find(h->address);
      if (h->state == member_state::alive && it != st.links.end() && it->second.ready)
        helpers.push_back(it->second.gateway);
    }
    std::shuffle(helpers.begin(), helpers.end(), st.rng);
    if (helpers.size() > st.cfg.indirect_probes)
      helpers.resize(st.cfg.indirect_probes);
    if (helpers.empty()) {
      st.probing.erase(node);
      auto* before = st.table->find(node);
      auto old = before ? std::optional<member>(*before) : std::nullopt;
      if (st.table->suspect(node, "no ack to a ping (" + describe(problem) + ")", now_ms()))
        log_update(self, old ? &*old : nullptr, *st.table->find(node));
      return;
    }
    auto pending = std::make_shared<size_t>(helpers.size());
    auto acked = std::make_shared<bool>(false);
    auto settle = [=](bool ok) {
      auto& st = self->state;
      *acked = *acked || ok;
      if (--*pending > 0)
        return;
      st.probing.erase(node);
      if (*acked || unreliable(st, started))
        return;
      auto* before = st.table->find(node);
      auto old = before ? std::optional<member>(*before) : std::nullopt;
      if (st.table->suspect(node, "no ack to a ping nor through " + std::to_string(helpers.size())
                                    + " other members (" + describe(problem) + ")",
                            now_ms()))
        log_update(self, old ? &*old : nullptr, *st.table->find(node));
    };
    peer_ping_req_request req;
    req.from = st.table->self_id();
    req.target = target;
    req.updates = outgoing(*st.table);
    for (auto& h : helpers)
      self->request(h, st.cfg.ping_timeout * 2, wrap(verb::peer_ping_req, encode(req)))
        .then(
          [=](const std::string& body) {
            if (auto ack = decode<peer_ack>(body, "peer ack"))
              apply_updates(self, ack->updates);
            settle(true);
          },
          [=](const caf::error&) { settle(false); });
  });
}

void try_join(membership_actor* self) {
  auto& st = self->state;
  st.last_join_try = now_ms();
  for (auto& seed : st.cfg.seeds) {
    if (seed == st.table->self().address)
      continue;
    with_link(self, seed, [=](const caf::actor& gw, const caf::error& problem) {
      auto& st = self->state;
      auto report = [=](const std::string& what) {
        auto& st = self->state;
        if (st.join_problems[seed] != what) {
          st.join_problems[seed] = what;
          st.log->error("cannot join through {}: {}", seed, what);
        }
      };
      if (!gw)
        return report(describe(problem));
      self->request(gw, st.cfg.connect_timeout,
                    wrap(verb::peer_join, encode(peer_join_request{st.table->self()})))
        .then(
          [=](const std::string& body) {
            auto r = decode<nodes_reply>(body, "peer join");
            if (!r)
              return report(r.error());
            auto& st = self->state;
            apply_updates(self, r->members);
            if (!st.joined)
              st.log->info("joined the cluster through {}: {} members, {} alive", seed,
                           st.table->all().size(), st.table->alive_count());
            st.joined = true;
            st.join_problems.clear();
          },
          [=](const caf::error& err) { report(describe(err)); });
    });
  }
}

void tick(membership_actor* self) {
  auto& st = self->state;
  auto now = now_ms();
  ++st.ticks;
  auto majority_before = st.table->has_majority();
  st.table->refresh_agreed(now);
  if (st.table->has_majority() != majority_before)
    st.told = 0; // subscribers hear the news with the next notify
  // Local health: a tick far behind its time means this node was paused (SIGSTOP, swap,
  // overload). The failures of what it asked before are its own fault, not the others'.
  if (st.last_tick_ms != 0 && now - st.last_tick_ms > st.cfg.probe_interval.count() + 1000) {
    st.log->warn("this node was paused for {} ms; probe failures until now are ignored and "
                 "suspicions restart",
                 now - st.last_tick_ms - st.cfg.probe_interval.count());
    st.unreliable_until = now + st.cfg.connect_timeout.count();
    st.table->restart_suspicions(now);
    // Paused longer than a suspicion lasts: the others may have declared this node dead
    // and adopted its jobs. Fence now rather than wait to hear it (a queued "suspect"
    // rumour may be refuted first, and the verdict then never arrives).
    // (The others need a ping timeout, an indirect probe and a whole suspicion to declare
    // a silent node dead; a shorter pause, e.g. a loaded machine, fences nothing. A node
    // alone has nobody to adopt its jobs.)
    auto pause = now - st.last_tick_ms;
    auto verdict_after = 3 * st.cfg.ping_timeout.count() + st.cfg.suspicion_timeout.count() - 300;
    if (pause > verdict_after && !st.table->probe_targets().empty()) {
      auto verdict = st.table->self();
      verdict.state = member_state::dead;
      verdict.reason = "this node was paused for " + std::to_string(pause) + " ms";
      fence(self, verdict);
    }
  }
  st.last_tick_ms = now;
  // Only a node that sees a majority turns a suspicion into a death verdict: the member
  // list shrinks only when a majority agrees. A minority (cut off by a partition) keeps
  // the others suspect, and its verdicts never fence the majority's nodes after the heal.
  // (A refused connection, proof that the process is gone, still declares at once.)
  auto expired = st.table->has_majority()
                   ? st.table->expired_suspects(now - st.cfg.suspicion_timeout.count())
                   : std::vector<std::string>{};
  for (auto& node : expired) {
    auto old = *st.table->find(node);
    if (st.table->declare_dead(node, "suspected for "
                                       + std::to_string(st.cfg.suspicion_timeout.count())
                                       + " ms without refutation (" + old.reason + ")",
                               now))
      log_update(self, &old, *st.table->find(node));
  }
  if (!st.joined && !st.cfg.seeds.empty() && now - st.last_join_try >= 1000)
    try_join(self);
  auto targets = st.table->probe_targets();
  if (!targets.empty()) {
    if (st.next >= st.order.size()) {
      st.order = targets;
      std::shuffle(st.order.begin(), st.order.end(), st.rng);
      st.next = 0;
    }
    probe(self, st.order[st.next++]);
  }
  // About once a second, one member declared dead in the last 10 minutes is pinged: if it
  // answers, it refutes (a freeze on either side), else nothing changes.
  if (st.ticks % 5 == 0) {
    auto dead = st.table->dead_since(now - 600'000);
    if (!dead.empty()) {
      auto& node = dead[st.rng() % dead.size()];
      auto target = *st.table->find(node);
      if (!st.probing.count(node)) {
        st.probing.insert(node);
        ping(self, target, [=](bool, const caf::error&) { self->state.probing.erase(node); });
      }
    }
  }
  notify(self);
  self->delayed_send(self, st.cfg.probe_interval, atoms::tick::value);
}

caf::result<std::string> on_envelope(membership_actor* self, const envelope& env) {
  auto& st = self->state;
  switch (static_cast<verb>(env.verb)) {
    case verb::nodes: {
      nodes_reply r;
      r.self = st.table->self_id();
      r.members = st.table->all();
      r.agreed = static_cast<uint32_t>(st.table->agreed().size());
      r.agreed_alive = static_cast<uint32_t>(st.table->agreed_alive());
      return encode(r);
    }
    case verb::peer_join: {
      auto req = decode<peer_join_request>(env.body, "peer join");
      if (!req)
        return make_error(errc::bad_request, req.error());
      if (req->self.node.empty() || req->self.address.empty())
        return make_error(errc::bad_request, "peer join: the joining member has no id or address");
      apply_updates(self, {req->self});
      nodes_reply r;
      r.self = st.table->self_id();
      r.members = st.table->all();
      return encode(r);
    }
    case verb::peer_ping: {
      auto req = decode<peer_ping_request>(env.body, "peer ping");
      if (!req)
        return make_error(errc::bad_request, req.error());
      if (req->to != st.table->self_id())
        return make_error(errc::not_found, "this is node " + st.table->self_id() + ", not "
                                             + req->to);
      if (st.fencing)
        return make_error(errc::busy, "this node is stopping its jobs before it rejoins");
      apply_updates(self, req->updates);
      return encode(peer_ack{st.table->self_id(), outgoing(*st.table)});
    }
    case verb::peer_ping_req: {
      auto req = decode<peer_ping_req_request>(env.body, "peer ping-req");
      if (!req)
        return make_error(errc::bad_request, req.error());
      apply_updates(self, req->updates);
      auto rp = self->make_response_promise<std::string>();
      ping(self, req->target, [=](bool ok, const caf::error& problem) mutable {
        if (!ok) {
          rp.deliver(make_error(errc::busy, "indirect probe failed: " + describe(problem)));
          return;
        }
        rp.deliver(encode(peer_ack{self->state.table->self_id(),
                                   outgoing(*self->state.table)}));
      });
      return rp;
    }
    default:
      return make_error(errc::bad_request, "membership: unexpected verb "
                                             + std::to_string(env.verb));
  }
}

caf::behavior membership_impl(membership_actor* self, membership_config cfg) {
  auto& st = self->state;
  st.log = logger("membership");
  st.table = std::make_unique<member_table>(cfg.self);
  st.cfg = std::move(cfg);
  register_as(self->system(), membership_name, caf::actor_cast<caf::strong_actor_ptr>(self));
  self->set_down_handler([=](const caf::down_msg& dm) {
    auto& st = self->state;
    st.subscribers.erase(std::remove_if(st.subscribers.begin(), st.subscribers.end(),
                                        [&](const caf::actor& a) { return a.address() == dm.source; }),
                         st.subscribers.end());
    for (auto& [address, link] : st.links) {
      if (!link.gateway || link.gateway.address() != dm.source)
        continue;
      auto addr = address;
      st.links.erase(address);
      // A lost connection: re-probe at once. Refused confirms the death (kill -9).
      for (auto& m : st.table->all()) {
        if (m.address != addr || m.node == st.table->self_id()
            || (m.state != member_state::alive && m.state != member_state::suspect))
          continue;
        auto node = m.node;
        auto started = now_ms();
        with_link(self, addr, [=](const caf::actor& gw, const caf::error& problem) {
          if (!gw && unreliable(self->state, started))
            return; // lost while this node was paused: the next probes decide
          if (!gw)
            return connect_failed(self, node, problem, "connection lost, re-probe");
          probe(self, node);
        });
      }
      return;
    }
  });
  st.log->info("membership of node {} (incarnation {}) at {}; {}", st.table->self_id(),
               incarnation_text(st.table->self().incarnation), st.table->self().address,
               st.cfg.seeds.empty() ? std::string("no seeds: a new cluster")
                                    : "joining through " + std::to_string(st.cfg.seeds.size())
                                        + " seed(s)");
  self->send(self, atoms::tick::value);
  return {
    [=](const envelope& env) { return on_envelope(self, env); },
    [=](atoms::tick) { tick(self); },
    [=](atoms::subscribe) {
      auto& st = self->state;
      auto who = caf::actor_cast<caf::actor>(self->current_sender());
      if (!who)
        return;
      st.subscribers.erase(std::remove(st.subscribers.begin(), st.subscribers.end(), who),
                           st.subscribers.end());
      st.subscribers.push_back(who);
      self->monitor(who);
      self->send(who, atoms::members::value, st.table->all(), st.table->has_majority(),
                 static_cast<uint32_t>(st.table->agreed().size()),
                 static_cast<uint32_t>(st.table->agreed_alive()));
    },
    [=](atoms::forward, const std::string& node, const envelope& env,
        uint32_t timeout_ms) -> caf::result<std::string> {
      auto& st = self->state;
      auto* m = st.table->find(node);
      if (!m)
        return make_error(errc::unavailable, "no member " + node);
      if (m->state == member_state::dead || m->state == member_state::left)
        return make_error(errc::unavailable, "member " + node + " is " + to_string(m->state));
      auto rp = self->make_response_promise<std::string>();
      auto timeout = std::chrono::milliseconds(timeout_ms);
      ask_peer(
        self, m->address, env, timeout,
        [=](std::string& body) mutable { rp.deliver(std::move(body)); },
        [=](const caf::error& err, const std::string& problem) mutable {
          if (is(err, errc::unreachable) || is(err, errc::connection_refused))
            rp.deliver(make_error(errc::unavailable, "cannot reach member " + node + ": " + problem));
          else
            rp.deliver(err);
        });
      return rp;
    },
    [=](atoms::shutdown) -> caf::result<bool> {
      auto& st = self->state;
      st.table->leave(now_ms());
      std::vector<member> targets;
      for (auto& id : st.table->probe_targets())
        targets.push_back(*st.table->find(id));
      auto rp = self->make_response_promise<bool>();
      if (targets.empty()) {
        rp.deliver(true);
        return rp;
      }
      auto pending = std::make_shared<size_t>(targets.size());
      for (auto& t : targets)
        ping(self, t, [=](bool, const caf::error&) mutable {
          if (--*pending == 0)
            rp.deliver(true);
        });
      return rp;
    },
  };
}

} // namespace

caf::actor spawn_membership(caf::actor_system& sys, membership_config cfg) {
  return sys.spawn(membership_impl, std::move(cfg));
}

} // namespace monkey
