// SPDX-License-Identifier: Apache-2.0
#include "actors/router/router.hpp"

#include <map>
#include <memory>
#include <set>

#include <caf/all.hpp>

#include "actors/coordinator/replica_rules.hpp"
#include "actors/fan_out.hpp"
#include "actors/membership/membership.hpp"
#include "actors/messages.hpp"
#include "actors/router/listing.hpp"
#include "runtime/errc.hpp"
#include "runtime/logging.hpp"
#include "runtime/ownership.hpp"

namespace monkey {

namespace {

/// A forwarded submission waits this long for the owner's answer (its holders' writes
/// included) ...
constexpr auto forward_timeout = std::chrono::seconds(8);
/// ... but the owner must start on it within this time, or it refuses it.
constexpr auto forward_deadline = std::chrono::seconds(2);
constexpr auto query_timeout = std::chrono::seconds(10);
/// Owners tried for one submission before the entry node accepts it itself.
constexpr size_t owners_tried = 3;
/// A node that joins through seeds holds its clients' requests until it has joined (it
/// would answer them from itself alone: "no job X in the cluster" for a job the others
/// hold, a submission owned here with no other copy), at most this long ...
constexpr auto join_wait = std::chrono::seconds(5);
/// ... and at most this many of them.
constexpr size_t max_early = 4096;
/// A job no member knows is looked up again while the view has changed within this time
/// (a member joined, died or came back, or this node just joined): a member this node
/// has not heard of yet may hold it, as when the only other node that knew it dies ...
constexpr int64_t settle_ms = 3000;
/// ... every `settle_retry`, for at most `settle_wait` per request.
constexpr auto settle_retry = std::chrono::milliseconds(250);
constexpr int64_t settle_wait_ms = 5000;

/// Runs a lookup again later (`resolve` while the view settles).
using resolve_again = caf::atom_constant<caf::atom("m_rslvag")>;

/// A submission forwarded to an owner and not answered yet.
struct pending_forward {
  caf::response_promise rp;
  submit_request req;
  std::vector<std::string> owners;
  size_t index = 0;
};

struct router_state {
  router_config cfg;
  caf::actor coordinator;
  caf::actor tasks; ///< the task dispatcher
  caf::actor membership;
  cluster_view view{""};
  std::map<job_id, job_summary> seen; ///< rows of the last listings, forwarded submissions
  std::map<uint64_t, pending_forward> forwards;
  uint64_t forward_seq = 0;
  /// Requests are answered once the membership has told this router the cluster (with
  /// seeds: a member other than this node), or `join_wait` after the start.
  bool ready = false;
  std::vector<std::pair<envelope, caf::response_promise>> early; ///< held until ready
  int64_t ready_ms = 0; ///< when this router began to answer
  std::map<uint64_t, std::function<void()>> later; ///< lookups waiting for the view to settle
  uint64_t later_seq = 0;
  std::shared_ptr<spdlog::logger> log;
  static inline const char* name = "router";
};

using router_actor = caf::stateful_actor<router_state>;

/// Answers from this node's coordinator and from every other alive member to one request:
/// `each` gets every answer (this node's under its own id), `done` runs once at the end.
void ask_everyone(router_actor* self, verb v, const std::string& local_body,
                  const std::string& peer_body, std::function<void(const peer_answer&)> each,
                  std::function<void()> done) {
  auto& st = self->state;
  auto pending = std::make_shared<size_t>(2);
  auto finish = [pending, done] {
    if (--*pending == 0)
      done();
  };
  auto me = st.view.self();
  self->request(st.coordinator, query_timeout, envelope{static_cast<uint16_t>(v), local_body})
    .then(
      [=](std::string& body) {
        peer_answer a;
        a.node = me;
        a.body = std::move(body);
        each(a);
        finish();
      },
      [=](caf::error& err) {
        peer_answer a;
        a.node = me;
        a.err = std::move(err);
        each(a);
        finish();
      });
  fan_out(self, st.membership, st.view.others_alive(), v, peer_body, query_timeout, each,
          finish);
}

// ---- submissions --------------------------------------------------------------------------

void remember_forwarded(router_state& st, const submit_request& req, const std::string& owner,
                        const std::string& body) {
  auto r = decode<submit_reply>(body, "submit");
  if (!r)
    return;
  for (auto& id : r->ids)
    if (!st.seen.count(id)) {
      job_summary s;
      s.id = id;
      s.name = display_name(req.spec);
      s.priority = req.spec.priority;
      s.cpus = req.spec.cpus;
      s.gpus = req.spec.gpus;
      s.submitted_ms = s.updated_ms = now_ms();
      s.reason = "submitted";
      s.owner = owner;
      s.holders = {owner};
      st.seen[id] = s;
    }
}

void try_owner(router_actor* self, caf::response_promise rp, submit_request req,
               std::vector<std::string> owners, size_t i);

/// A forwarded submission ends once: with the owner's answer, or when it is given up
/// (a timeout, or its owner stopped being alive past the deadline) and tried elsewhere.
void end_forward(router_actor* self, uint64_t seq, std::optional<std::string> body,
                 caf::error err) {
  auto& st = self->state;
  auto it = st.forwards.find(seq);
  if (it == st.forwards.end())
    return; // settled already
  auto f = std::move(it->second);
  st.forwards.erase(it);
  if (body) {
    // Remember what was just accepted elsewhere: `jobs` here always shows the caller's
    // own new jobs, even while their owner does not answer.
    remember_forwarded(st, f.req, f.owners[f.index], *body);
    return f.rp.deliver(std::move(*body));
  }
  // The owner answered (full queue, bad spec, a partial write): that answer stands.
  // Unavailable (unreachable, dead, or past the deadline) and timeouts: the next owner.
  if (err.category() == caf::atom("monkey") && !is(err, errc::unavailable))
    return f.rp.deliver(std::move(err));
  st.log->warn("forwarding a submission to its owner {} failed ({}); trying the next "
               "candidate",
               f.owners[f.index], describe(err));
  f.req.retry = true;
  try_owner(self, f.rp, std::move(f.req), std::move(f.owners), f.index + 1);
}

/// Sends the submission to the `i`-th owner candidate; when it fails, to the next one with
/// `retry` set (that owner then looks the client key up on every member first); after
/// `owners_tried`, this node's own coordinator accepts it. An owner must start on the
/// submission before its deadline (it refuses it after): once the deadline has passed and
/// the owner is no longer alive here, the submission is tried elsewhere at once, so a
/// frozen owner costs failure detection plus a retry, not a whole timeout.
void try_owner(router_actor* self, caf::response_promise rp, submit_request req,
               std::vector<std::string> owners, size_t i) {
  auto& st = self->state;
  req.hops = 1;
  std::string owner = i < owners.size() && i < owners_tried ? owners[i] : st.view.self();
  if (owner != st.view.self() && !st.view.alive(owner))
    return try_owner(self, rp, std::move(req), std::move(owners), i + 1);
  if (owner == st.view.self()) {
    req.deadline_ms = 0;
    self->request(st.coordinator, caf::infinite,
                  envelope{static_cast<uint16_t>(verb::submit), encode(req)})
      .then([=](std::string& body) mutable { rp.deliver(std::move(body)); },
            [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
    return;
  }
  if (st.forwards.size() >= st.cfg.max_forwards)
    return rp.deliver(make_error(errc::busy, "this node is forwarding "
                                               + std::to_string(st.forwards.size())
                                               + " submissions already: try again later"));
  req.deadline_ms = now_ms() + std::chrono::milliseconds(forward_deadline).count();
  auto seq = ++st.forward_seq;
  auto body = encode(req);
  st.forwards[seq] = pending_forward{rp, std::move(req), std::move(owners), i};
  ask_node(self, st.membership, owner, verb::submit, body, forward_timeout)
    .then([=](std::string& reply) { end_forward(self, seq, std::move(reply), {}); },
          [=](caf::error& err) { end_forward(self, seq, std::nullopt, std::move(err)); });
  self->delayed_send(self, forward_deadline + std::chrono::milliseconds(100),
                     atoms::check::value, seq);
}

/// After the deadline: a forward whose owner is no longer alive is tried elsewhere (the
/// owner refuses it from now on, should it wake up).
void check_forward(router_actor* self, uint64_t seq) {
  auto& st = self->state;
  auto it = st.forwards.find(seq);
  if (it == st.forwards.end())
    return;
  auto& owner = it->second.owners[it->second.index];
  if (st.view.alive(owner)) {
    self->delayed_send(self, std::chrono::milliseconds(250), atoms::check::value, seq);
    return;
  }
  end_forward(self, seq, std::nullopt,
              make_error(errc::unavailable, "owner " + owner + " is "
                                              + to_string(st.view.state_of(owner))));
}

void route_submit(router_actor* self, caf::response_promise rp, submit_request req) {
  auto& st = self->state;
  if (req.client_key.empty()) // a key makes forwarding safe to retry
    req.client_key = random_key();
  std::vector<holder_candidate> candidates;
  for (auto& m : st.view.members())
    if (m.state == member_state::alive || m.node == st.view.self())
      candidates.push_back({m.node, m.cpus, m.gpus});
  if (!st.view.known() || candidates.size() <= 1 || !st.membership)
    return try_owner(self, rp, std::move(req), {}, owners_tried);
  std::vector<std::string> able;
  for (auto& c : candidates)
    if (c.cpus >= req.spec.cpus && c.gpus >= req.spec.gpus)
      able.push_back(c.node);
  // A job no alive member has room for (a GPU job on a CPU-only cluster) is accepted and
  // waits queued, its `why` naming what it waits for: such a node may join. Its owner is
  // then any member.
  if (able.empty())
    for (auto& c : candidates)
      able.push_back(c.node);
  try_owner(self, rp, std::move(req), rendezvous_rank(req.client_key, able), 0);
}

// ---- listings -----------------------------------------------------------------------------

void cluster_list(router_actor* self, caf::response_promise rp, list_request req) {
  auto& st = self->state;
  auto merged = std::make_shared<std::map<job_id, job_summary>>();
  auto unreachable = std::make_shared<std::vector<std::string>>();
  // A suspect member may hold jobs no one else has: the list is partial without it.
  for (auto& n : st.view.in_state(member_state::suspect))
    unreachable->push_back(n + " (suspect)");
  auto limit = req.limit;
  bool filtered = !req.state.empty() || !req.sweep.empty();
  req.local = true;
  req.limit = 0;
  auto body = encode(req);
  ask_everyone(
    self, verb::list, body, body,
    [=](const peer_answer& a) {
      if (!a) {
        unreachable->push_back(a.node);
        return;
      }
      if (auto r = decode<list_reply>(*a.body, "jobs"))
        merge_rows(*merged, r->jobs);
    },
    [=]() mutable {
      auto& st = self->state;
      remember_and_mark(st.seen, *merged, filtered, st.view.self(),
                        [&](const std::string& n) { return st.view.state_of(n); }, now_ms(),
                        st.cfg.max_seen);
      auto r = finish_list(*merged, limit);
      r.unreachable = *unreachable;
      r.dead = st.view.in_state(member_state::dead);
      rp.deliver(encode(r));
    });
}

// ---- one job's verbs ----------------------------------------------------------------------

/// Whether this node's view of the cluster changed within `settle_ms`: it may not know
/// every member yet (SWIM spreads a new member through the ones that know it).
/// A node alone (no seeds, no member yet) has none to learn of.
bool settling(const router_state& st) {
  auto last = st.cfg.joining ? st.ready_ms : int64_t{0};
  for (auto& m : st.view.members())
    if (m.node != st.view.self())
      last = std::max(last, m.since_ms);
  return now_ms() - last < settle_ms;
}

/// Resolves `text` (a full id or a suffix) across the cluster: `then` gets the job's row,
/// or the error to answer (ambiguous: the matches are listed; none: not found, once the
/// view has settled or `settle_wait_ms` after `started_ms`).
void resolve(router_actor* self, const std::string& text,
             std::function<void(const job_summary*, caf::error)> then, int64_t started_ms = 0) {
  if (started_ms == 0)
    started_ms = now_ms();
  list_request req;
  req.local = true;
  req.id = text;
  auto body = encode(req);
  auto rows = std::make_shared<std::map<job_id, job_summary>>();
  auto unanswered = std::make_shared<size_t>(0);
  ask_everyone(
    self, verb::list, body, body,
    [=](const peer_answer& a) {
      if (!a) {
        *unanswered += 1;
        return;
      }
      if (auto r = decode<list_reply>(*a.body, "jobs"))
        merge_rows(*rows, r->jobs);
    },
    [=] {
      id_matcher m(text, "job");
      for (auto& [id, s] : *rows)
        m.offer(id);
      // Jobs remembered from earlier listings (their holders may all be down now).
      for (auto& [id, s] : self->state.seen)
        m.offer(id);
      if (auto id = m.match()) {
        auto it = rows->find(*id);
        if (it != rows->end())
          return then(&it->second, caf::error{});
        auto& seen = self->state.seen[*id];
        return then(&seen, caf::error{});
      }
      auto& st = self->state;
      if (!m.ambiguous() && !m.too_short() && settling(st)
          && now_ms() - started_ms < settle_wait_ms) {
        auto seq = ++st.later_seq;
        st.later.emplace(seq, [=] { resolve(self, text, then, started_ms); });
        self->delayed_send(self, settle_retry, resolve_again::value, seq);
        return;
      }
      auto where = *unanswered > 0 ? " (" + std::to_string(*unanswered)
                                       + " members did not answer: it may be on one of them)"
                                   : std::string{};
      then(nullptr, make_error(m.ambiguous() || m.too_short() ? errc::bad_request
                                                                : errc::not_found,
                               m.problem()
                                 + (m.ambiguous() || m.too_short() ? ""
                                                                   : " in the cluster" + where)));
    });
}

/// The member that answers for a job: its owner when alive, else nobody (an error naming
/// the owner's state).
void one_job_verb(router_actor* self, caf::response_promise rp, verb v, const envelope& env,
                  const std::string& text) {
  resolve(self, text, [=](const job_summary* row, caf::error err) mutable {
    if (err)
      return rp.deliver(std::move(err));
    auto& st = self->state;
    auto id = row->id;
    auto owner = row->owner;
    auto ran_on = row->ran_on;
    auto remembered = row->unavailable || !row->version;
    std::string body;
    if (v == verb::logs) {
      auto req = *decode<logs_request>(env.body, "logs");
      req.id = id.str();
      req.local = true;
      body = encode(req);
    } else {
      auto req = *decode<id_request>(env.body, to_string(v));
      req.id = id.str();
      req.local = true;
      body = encode(req);
    }
    if (v == verb::cancel) {
      // Only the owner cancels.
      auto os = st.view.state_of(owner);
      if (owner != st.view.self() && os != member_state::alive)
        return rp.deliver(make_error(errc::unavailable,
                                     "job " + id.short_str() + ": its owner " + owner + " is "
                                       + to_string(os)
                                       + "; a holder adopts it once it is declared dead: "
                                         "cancel it again then"));
      if (owner == st.view.self()) {
        self->request(st.coordinator, query_timeout, envelope{env.verb, body})
          .then([=](std::string& b) mutable { rp.deliver(std::move(b)); },
                [=](caf::error& e) mutable { rp.deliver(std::move(e)); });
        return;
      }
      ask_node(self, st.membership, owner, v, body, query_timeout)
        .then([=](std::string& b) mutable { rp.deliver(std::move(b)); },
              [=](caf::error& e) mutable { rp.deliver(std::move(e)); });
      return;
    }
    auto best = std::make_shared<std::optional<show_reply>>();
    auto with_metrics = std::make_shared<std::optional<show_reply>>();
    auto best_body = std::make_shared<std::optional<std::string>>();
    auto owner_text = std::make_shared<std::optional<std::string>>();
    auto first_ok = std::make_shared<std::optional<std::string>>();
    auto first_err = std::make_shared<caf::error>();
    ask_everyone(
      self, v, body, body,
      [=](const peer_answer& a) {
        if (!a) {
          if (!*first_err || is(*first_err, errc::not_found))
            if (!is(a.err, errc::not_found) || !*first_err)
              *first_err = a.err;
          return;
        }
        if (v == verb::show) {
          auto r = decode<show_reply>(*a.body, "show");
          if (!r)
            return;
          bool from_owner = a.node == r->record.owner.str();
          // The metrics are in the journal of the node that ran the job; the standing
          // copy may come from another holder.
          if (!r->metric_history.empty() && (!*with_metrics || a.node == ran_on))
            *with_metrics = *r;
          if (!*best || replica::stands_over(r->record, (*best)->record)) {
            *best = *r;
            *best_body = *a.body;
          }
          if (from_owner)
            *owner_text = r->why;
          return;
        }
        if (a.node == owner)
          *owner_text = *a.body;
        if (!*first_ok)
          *first_ok = *a.body;
      },
      [=]() mutable {
        auto& st = self->state;
        if (v == verb::show && *best) {
          auto r = **best;
          if (*owner_text && r.record.owner.str() == owner)
            r.why = **owner_text;
          if (r.metric_history.empty() && *with_metrics) {
            r.metric_history = (*with_metrics)->metric_history;
            r.last_metrics = (*with_metrics)->last_metrics;
            r.series = (*with_metrics)->series;
          }
          return rp.deliver(encode(r));
        }
        if (v != verb::show && (*owner_text || *first_ok))
          return rp.deliver(*owner_text ? **owner_text : **first_ok);
        if (remembered)
          return rp.deliver(make_error(errc::unavailable,
                                       "job " + id.short_str()
                                         + " is listed from memory: every holder is down ("
                                         + owner + " owns it)"));
        if (v == verb::logs && !ran_on.empty() && st.view.state_of(ran_on) != member_state::alive)
          return rp.deliver(make_error(errc::unavailable,
                                       "the logs of job " + id.short_str() + " are on node "
                                         + ran_on + ", which is "
                                         + to_string(st.view.state_of(ran_on))));
        if (*first_err)
          return rp.deliver(*first_err);
        rp.deliver(make_error(errc::not_found, "no job " + id.short_str() + " in the cluster"));
      });
  });
}

/// `monkey rm`: every alive member deletes the jobs (record, transitions, metrics, logs) and
/// keeps a tombstone; members not reached now learn it from a member that has one when
/// they send a copy (anti-entropy, replication), and delete theirs then.
void remove_jobs(router_actor* self, caf::response_promise rp, const remove_request& req) {
  auto& st = self->state;
  if (req.ids.empty())
    return rp.deliver(make_error(errc::bad_request, "rm: no job ids"));
  if (req.ids.size() > 65536)
    return rp.deliver(make_error(errc::bad_request, "rm: more than 65536 jobs at once"));
  for (auto& id : req.ids)
    st.seen.erase(id);
  auto body = encode(forget_request{st.view.self(), req.ids});
  auto refused = std::make_shared<std::map<job_id, std::string>>();
  auto unreached = std::make_shared<std::vector<std::string>>();
  for (auto& n : st.view.in_state(member_state::suspect))
    unreached->push_back(n + " (suspect)");
  for (auto& n : st.view.in_state(member_state::dead))
    unreached->push_back(n + " (dead)");
  ask_everyone(
    self, verb::peer_forget, body, body,
    [=](const peer_answer& a) {
      if (!a) {
        unreached->push_back(a.node + " (" + describe(a.err) + ")");
        return;
      }
      auto r = decode<forget_reply>(*a.body, "forget");
      if (!r)
        return;
      for (auto& why : r->refused)
        for (auto& id : req.ids)
          if (why.compare(0, id.short_str().size(), id.short_str()) == 0)
            (*refused)[id] = why;
    },
    [=]() mutable {
      remove_reply out;
      for (auto& id : req.ids)
        if (auto it = refused->find(id); it != refused->end())
          out.refused.push_back(it->second);
        else
          out.removed.push_back(id);
      out.unreached = *unreached;
      rp.deliver(encode(out));
    });
}

void on_envelope(router_actor* self, const envelope& env, caf::response_promise rp) {
  auto& st = self->state;
  // (The request has a response promise, so it is passed on, not delegated.)
  auto to_coordinator = [&] {
    self->request(st.coordinator, caf::infinite, env)
      .then([=](std::string& body) mutable { rp.deliver(std::move(body)); },
            [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
  };
  auto v = static_cast<verb>(env.verb);
  switch (v) {
    case verb::submit: {
      auto req = decode<submit_request>(env.body, "submit");
      if (!req)
        return rp.deliver(make_error(errc::bad_request, req.error()));
      if (req->hops > 0)
        return to_coordinator();
      return route_submit(self, rp, std::move(*req));
    }
    case verb::list: {
      auto req = decode<list_request>(env.body, "jobs");
      if (!req)
        return rp.deliver(make_error(errc::bad_request, req.error()));
      if (req->local || !req->key.empty() || !req->id.empty())
        return to_coordinator();
      return cluster_list(self, rp, std::move(*req));
    }
    case verb::show:
    case verb::why:
    case verb::cancel:
    case verb::logs: {
      std::string text;
      bool local = false;
      if (v == verb::logs) {
        auto req = decode<logs_request>(env.body, "logs");
        if (!req)
          return rp.deliver(make_error(errc::bad_request, req.error()));
        text = req->id, local = req->local;
      } else {
        auto req = decode<id_request>(env.body, to_string(v));
        if (!req)
          return rp.deliver(make_error(errc::bad_request, req.error()));
        text = req->id, local = req->local;
      }
      if (local)
        return to_coordinator();
      return one_job_verb(self, rp, v, env, text);
    }
    case verb::remove: {
      auto req = decode<remove_request>(env.body, "rm");
      if (!req)
        return rp.deliver(make_error(errc::bad_request, req.error()));
      return remove_jobs(self, rp, *req);
    }
    case verb::peer_forget: { // from another node's rm: this router forgets its rows too
      auto req = decode<forget_request>(env.body, "peer forget");
      if (!req)
        return rp.deliver(make_error(errc::bad_request, req.error()));
      for (auto& id : req->ids)
        st.seen.erase(id);
      return to_coordinator();
    }
    case verb::status:
    case verb::devices: {
      auto seen = st.seen.size();
      self->request(st.coordinator, query_timeout, env)
        .then(
          [=](std::string& body) mutable {
            auto s = decode<status_reply>(body, "status");
            if (!s)
              return rp.deliver(std::move(body));
            s->sizes["router_seen"] = static_cast<int64_t>(seen);
            auto reply = std::make_shared<status_reply>(std::move(*s));
            self->request(self->state.tasks, query_timeout, atoms::counts::value)
              .then(
                [=](const std::vector<uint64_t>& n) mutable {
                  if (n.size() == 2) {
                    reply->tasks_queued = n[0];
                    reply->tasks_in_flight = n[1];
                  }
                  rp.deliver(encode(*reply));
                },
                [=](const caf::error&) mutable { rp.deliver(encode(*reply)); });
          },
          [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
      return;
    }
    default:
      return to_coordinator();
  }
}


/// The verbs a router answers by asking the other members (or, for a submission, its
/// owner): the ones held while this node joins.
bool spans_cluster(verb v) {
  switch (v) {
    case verb::submit:
    case verb::list:
    case verb::show:
    case verb::why:
    case verb::cancel:
    case verb::logs:
    case verb::remove:
      return true;
    default:
      return false;
  }
}

/// Answers the requests held while this node was joining, in their order.
void become_ready(router_actor* self) {
  auto& st = self->state;
  st.ready = true;
  st.ready_ms = now_ms();
  auto early = std::move(st.early);
  st.early.clear();
  if (!early.empty())
    SPDLOG_LOGGER_DEBUG(st.log, "{} request(s) held while joining go on", early.size());
  for (auto& [env, rp] : early)
    on_envelope(self, env, std::move(rp));
}

caf::behavior router_impl(router_actor* self, router_config cfg, caf::actor coordinator,
                          caf::actor tasks) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.coordinator = std::move(coordinator);
  st.tasks = std::move(tasks);
  st.view = cluster_view{st.cfg.node.str()};
  st.log = logger("router");
  self->set_down_handler([=](const caf::down_msg& dm) {
    auto& st = self->state;
    if (st.membership && st.membership.address() == dm.source) {
      st.membership = nullptr;
      self->delayed_send(self, std::chrono::milliseconds(100), atoms::subscribe::value);
    }
  });
  subscribe_members(self, self->state.membership);
  self->delayed_send(self, join_wait, atoms::timeout::value);
  return {
    [=](const envelope& env) {
      auto& st = self->state;
      if (st.ready || !spans_cluster(static_cast<verb>(env.verb)))
        return on_envelope(self, env, self->make_response_promise());
      if (st.early.size() >= max_early)
        return self->make_response_promise().deliver(
          make_error(errc::unavailable, "this node is still joining its cluster and holds "
                                          + std::to_string(max_early)
                                          + " requests already; try again in a few seconds"));
      st.early.emplace_back(env, self->make_response_promise());
    },
    [=](atoms::subscribe) { subscribe_members(self, self->state.membership); },
    [=](atoms::check, uint64_t seq) { check_forward(self, seq); },
    [=](resolve_again, uint64_t seq) {
      auto& st = self->state;
      auto it = st.later.find(seq);
      if (it == st.later.end())
        return;
      auto run = std::move(it->second);
      st.later.erase(it);
      run();
    },
    [=](atoms::members, member_list& ms, bool majority, uint32_t agreed, uint32_t agreed_alive) {
      auto& st = self->state;
      st.view.update(std::move(ms), majority, agreed, agreed_alive);
      if (!st.ready && (!st.cfg.joining || st.view.members().size() > 1))
        become_ready(self);
    },
    [=](atoms::timeout) {
      auto& st = self->state;
      if (st.ready)
        return;
      st.log->warn("not joined to the cluster after {} s: answering clients from what this "
                   "node knows ({} member(s))",
                   std::chrono::duration_cast<std::chrono::seconds>(join_wait).count(),
                   st.view.members().size());
      become_ready(self);
    },
    // A subscriber is asked to fence when this node was declared dead: the router runs
    // no job, so it has nothing to stop (the coordinator does).
    [=](atoms::fence, const std::string&) { return true; },
  };
}

} // namespace

caf::actor spawn_router(caf::actor_system& sys, router_config cfg, caf::actor coordinator,
                        caf::actor tasks) {
  return sys.spawn(router_impl, std::move(cfg), std::move(coordinator), std::move(tasks));
}

} // namespace monkey
