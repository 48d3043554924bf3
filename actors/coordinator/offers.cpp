// SPDX-License-Identifier: Apache-2.0
// Placement across nodes by reservation, and `monkey drain` (docs/cluster.md).
//
// A busy owner offers a queued job to another node (peer_reserve); that node, the only
// authority over its slots, grants it only if its own placement starts it now, which hands
// the job over in a new ownership term. An offer that is not answered keeps the job from
// starting here until it is withdrawn: the owner sends peer_withdraw until the asked node
// answers (it refuses the request from then on, or says it granted it) or is declared
// dead. A late grant can therefore never run beside this node's own attempt.
#include "actors/coordinator/state.hpp"

#include <csignal>
#include <unistd.h>

#include <optional>

#include "actors/fan_out.hpp"
#include "runtime/ownership.hpp"

namespace monkey {

namespace {

/// A queued job waits at least this long here before it is offered to another node (the
/// offers run every tick: a job submitted to a busy node starts on a free one within about
/// half a second; a sweep's trials are such jobs).
constexpr int64_t offer_after_ms = 200;
constexpr size_t offers_per_round = 4;
/// Reservation requests arriving within this window are judged together.
constexpr auto reservation_window = std::chrono::milliseconds(50);
/// A withdrawn request is remembered this long (a request can wait no longer than that in
/// a mailbox before its sender gives up on the node).
constexpr int64_t withdrawn_keep_ms = 600'000;

reserve_reply refusal(std::string why) {
  return reserve_reply{false, std::move(why)};
}

} // namespace

void on_reserve(coordinator_actor* self, caf::response_promise rp, replicate_request req) {
  auto& st = self->state;
  if (req.records.size() != 1)
    return rp.deliver(make_error(errc::bad_request, "peer reserve: one record expected"));
  drop_forgotten(self, req.records, req.from);
  if (req.records.empty())
    return rp.deliver(reply(refusal("the job was removed (monkey rm)")));
  auto rec = std::move(req.records.front());
  auto refuse = [&](const std::string& why) { rp.deliver(reply(refusal(why))); };
  if (!st.accepting || st.leaving || !st.view.majority() || !st.synced)
    return refuse("this node accepts no work now");
  if (st.withdrawn.count(rec.id))
    return refuse("the request was withdrawn by its owner");
  if (rec.state != job_state::queued || !rec.spec.after.empty())
    return refuse("only queued jobs without dependencies are placed elsewhere");
  if (rec.not_before_ms > now_ms())
    return refuse("the job's retry waits for its backoff");
  if (auto* mine = st.book.find(rec.id); (mine && replica::stands_over(*mine, rec))
                                         || st.running.count(rec.id))
    return refuse("this node has a newer record of the job");
  if (auto never = never_fits(st.cfg.total, need_of(rec.spec)); !never.empty())
    return refuse(never);
  // Requests arriving within a short window are judged together, by priority across
  // owners and against this node's own queue (grant_reservations).
  st.reservations.push_back({rp, std::move(rec)});
  if (st.reservations.size() == 1)
    self->delayed_send(self, reservation_window, atoms::reserve_round::value);
}

void reserve_round(coordinator_actor* self) {
  auto& st = self->state;
  auto pending = std::move(st.reservations);
  st.reservations.clear();
  if (pending.empty())
    return;
  std::vector<queued_job> asks;
  for (auto& p : pending) {
    queued_job q;
    q.id = p.rec.id;
    q.priority = p.rec.spec.priority;
    q.need = need_of(p.rec.spec);
    q.timeout_s = run_bound_s(p.rec.spec);
    asks.push_back(q);
  }
  bool open = st.accepting && !st.leaving && st.view.majority() && st.synced;
  auto granted = open ? grant_reservations(st.cfg.total, placement_running(st),
                                           placement_queue(st, nullptr), asks, now_ms())
                      : std::vector<job_id>{};
  for (auto& p : pending) {
    auto rp = p.rp;
    if (std::find(granted.begin(), granted.end(), p.rec.id) == granted.end()) {
      rp.deliver(reply(refusal(open ? "no free slots for it now ("
                                        + std::to_string(pending.size())
                                        + " requests judged by priority with this node's queue)"
                                    : "this node accepts no work now")));
      continue;
    }
    auto rec = p.rec;
    auto from = rec.owner.str();
    rec.owner = st.cfg.node;
    rec.version = replica::next_term(rec.version);
    rec.submit_seq = st.book.next_seq();
    touch(rec, job_state::queued, "placed on " + st.self_node() + " by a reservation from " + from,
          now_ms());
    std::vector<std::string> first{st.self_node()};
    if (st.view.alive(from))
      first.push_back(from);
    rec.replicas = holders_for(rec.id.str(), first, rec.replicas, st.view.alive_nodes(),
                               st.cfg.replicas);
    st.book.own(rec);
    st.log->info("took job {} over from {} by reservation", rec.id.short_str(), from);
    // A job that ran before (a retry): the metric points of its earlier attempts come
    // from the node that placed it here.
    std::vector<job_id> ran;
    if (!rec.attempts.empty())
      ran.push_back(rec.id);
    persist(self, {rec}, [=](const persist_result&) mutable {
      rp.deliver(reply(reserve_reply{true, {}}));
      request_schedule(self);
      pull_metrics(self, from, std::move(ran));
    });
  }
}

void on_withdraw(coordinator_actor* self, caf::response_promise rp, const id_request& req) {
  auto& st = self->state;
  auto id = job_id::parse(req.id);
  if (!id)
    return rp.deliver(make_error(errc::bad_request, "peer withdraw: not a job id"));
  if (auto* rec = st.book.owned(*id); rec && rec->owner == st.cfg.node)
    return rp.deliver(reply(reserve_reply{true, "granted before the withdrawal"}));
  st.withdrawn[*id] = now_ms() + withdrawn_keep_ms;
  for (auto it = st.reservations.begin(); it != st.reservations.end();) {
    if (it->rec.id == *id) {
      it->rp.deliver(reply(refusal("the request was withdrawn by its owner")));
      it = st.reservations.erase(it);
    } else {
      ++it;
    }
  }
  rp.deliver(reply(refusal("withdrawn")));
}

void withdraw_unanswered(coordinator_actor* self) {
  auto& st = self->state;
  auto now = now_ms();
  for (auto it = st.offered.begin(); it != st.offered.end();) {
    auto id = it->first;
    auto& o = it->second;
    // A job that is no longer queued here (taken over, cancelled) needs no offer.
    auto* rec = st.book.owned(id);
    if (!rec || rec->state != job_state::queued) {
      it = st.offered.erase(it);
      continue;
    }
    if (!o.unanswered || o.next_withdraw_ms > now) {
      ++it;
      continue;
    }
    auto ts = st.view.state_of(o.target);
    if (ts == member_state::dead || ts == member_state::left) {
      // Declared dead: a grant it made would have reached this node as a holder, and on
      // its return it is fenced and syncs before granting anything.
      st.log->info("job {}: the node asked to run it ({}) is {}; the request lapses",
                   id.short_str(), o.target, to_string(ts));
      it = st.offered.erase(it);
      request_schedule(self);
      continue;
    }
    o.next_withdraw_ms = now + 1000;
    auto target = o.target;
    if (st.membership)
      ask_node(self, st.membership, target, verb::peer_withdraw, encode(id_request{id.str(), true}),
               peer_timeout::reserve)
        .then(
          [=](const std::string& body) {
            auto& st = self->state;
            auto r = decode<reserve_reply>(body, "withdraw");
            if (!r)
              return;
            st.offered.erase(id);
            if (r->granted) {
              st.log->info("job {}: {} had granted the reservation; its record follows",
                           id.short_str(), target);
              return;
            }
            request_schedule(self); // withdrawn: it may start here
          },
          [](const caf::error&) {});
    ++it;
  }
}

namespace {

/// The member to offer queued job `rec` to: the first by rendezvous rank of those alive
/// with room for it that have not refused it yet ("" when every one has: a new round later).
std::string offer_target(coordinator_state& st, const job_record& rec) {
  auto& refused = st.refused_by[rec.id];
  for (auto& n : rendezvous_rank(rec.id.str(), members_with_room(st, need_of(rec.spec))))
    if (!refused.count(n))
      return n;
  refused.clear();
  return {};
}

/// Asks `target` to reserve room for `rec` (granted: the target owns the job now).
void send_offer(coordinator_actor* self, const job_record& rec, const std::string& target) {
  auto& st = self->state;
  auto id = rec.id;
  st.offered[id] = offer{target, false, 0};
  ask_node(self, st.membership, target, verb::peer_reserve,
           encode(replicate_request{st.self_node(), {rec}}), peer_timeout::reserve)
    .then(
      [=](const std::string& body) {
        auto& st = self->state;
        auto r = decode<reserve_reply>(body, "reserve");
        st.offered.erase(id);
        if (r && r->granted) {
          st.refused_by.erase(id);
          st.log->info("job {} placed on {} by reservation", id.short_str(), target);
          return; // its record (owner: the target) arrives by replication
        }
        SPDLOG_LOGGER_DEBUG(st.log, "job {}: {} refused: {}", id.short_str(), target,
                            r ? r->reason : r.error());
        st.refused_by[id].insert(target);
        request_schedule(self); // it may start here after all
      },
      [=](const caf::error& err) {
        // Unanswered: the target may still take the job. Nothing starts or offers it here
        // until the request is withdrawn (withdraw_unanswered).
        auto& st = self->state;
        st.log->warn("reservation request for job {} to {}: {}; withdrawing it",
                     id.short_str(), target, describe(err));
        if (auto it = st.offered.find(id); it != st.offered.end())
          it->second.unanswered = true;
      });
}

} // namespace

void offer_queued(coordinator_actor* self) {
  auto& st = self->state;
  auto now = now_ms();
  for (auto it = st.refused_by.begin(); it != st.refused_by.end();) {
    auto* rec = st.book.owned(it->first);
    if (!rec || rec->state != job_state::queued)
      it = st.refused_by.erase(it);
    else
      ++it;
  }
  if (!st.accepting || st.leaving || !st.view.majority() || !st.membership || !st.synced
      || st.book.queue().empty())
    return;
  // The local plan is computed only when a job may be offered (this runs every tick).
  std::optional<placement_plan> plan;
  size_t sent = 0;
  for (auto& [seq, id] : st.book.queue()) {
    if (sent >= offers_per_round)
      break;
    auto* rec = st.book.owned(id);
    // A gang keeps its owner: it is placed across nodes by leases (gangs.cpp).
    if (!rec || st.offered.count(id) || !rec->spec.after.empty() || is_gang(rec->spec)
        || now - rec->updated_ms < offer_after_ms || rec->not_before_ms > now)
      continue;
    if (!plan)
      plan = plan_placement(st.cfg.total, placement_running(st), placement_queue(st, nullptr),
                            now, false);
    if (std::find(plan->start.begin(), plan->start.end(), id) != plan->start.end())
      continue;
    auto target = offer_target(st, *rec);
    if (target.empty())
      continue;
    ++sent;
    send_offer(self, *rec, target);
  }
}

// ---- drain: a planned leave that hands the jobs over ----------------------------------

namespace {

/// Hands the queued (not running, not final) jobs among `ids` to new owners: the successor
/// by rendezvous among their other alive holders (else among all other alive members), in
/// a new ownership term; the record goes to its new holders (this node drops out of them,
/// keeping a replica until it leaves). A job whose heir does not confirm it is taken back
/// (and handed over again at the next check). Returns how many it handed over.
size_t hand_over(coordinator_actor* self, const std::vector<job_id>& ids) {
  auto& st = self->state;
  record_list out;
  for (auto& id : ids) {
    auto* mine = st.book.owned(id);
    if (!mine || st.running.count(id) || is_final(mine->state) || st.finals.count(id))
      continue;
    auto rec = *mine;
    std::vector<std::string> candidates;
    for (auto& n : rec.replicas)
      if (n != st.self_node() && st.view.alive(n))
        candidates.push_back(n);
    if (candidates.empty())
      candidates = st.view.others_alive();
    if (candidates.empty())
      continue; // alone: nobody to hand it to
    auto heir = successor(id.str(), candidates);
    auto heir_id = node_id::parse(heir);
    if (!heir_id)
      continue;
    rec.owner = *heir_id;
    rec.version = replica::next_term(rec.version);
    touch(rec, rec.state,
          rec.reason + (rec.reason.empty() ? "" : "; ") + "handed over by " + st.self_node()
            + " (draining) to " + heir,
          now_ms());
    rec.replicas = holders_for(id.str(), {heir}, rec.replicas, st.view.alive_nodes(),
                               st.cfg.replicas, {st.self_node()});
    rec.replicas.push_back(st.self_node()); // a copy stays here until the node is gone
    st.book.hold(rec);
    out.push_back(rec);
  }
  if (!out.empty()) {
    st.log->info("draining: handing {} jobs over to other members", out.size());
    persist(self, out, [=](const persist_result& r) {
      auto& st = self->state;
      if (r.copies >= 2)
        return;
      // Some heir did not confirm: whatever it did not take is reclaimed (a new term)
      // and offered again at the next check.
      for (auto& rec : out) {
        auto* h = st.book.held(rec.id);
        if (!h || replica::compare(h->rec, rec) != 0)
          continue;
        auto back = rec;
        back.owner = st.cfg.node;
        back.version = replica::next_term(back.version);
        touch(back, back.state, back.reason + "; taken back (the heir did not confirm)",
              now_ms());
        back.replicas = refreshed_holders(st, back);
        st.book.own(back);
        persist(self, {back});
      }
    });
  }
  return out.size();
}

/// Before a drained node leaves: every record it holds (its own finished jobs, and the
/// replicas of other owners' jobs) gets a copy at a member that stays, named in its
/// holders instead of this node. Without it, a record whose other holder died just
/// before (not yet detected) would leave with this node. check_drained waits for the
/// answers (a failed copy is logged: the other holders still have the record).
void hand_over_copies(coordinator_actor* self) {
  auto& st = self->state;
  auto others = st.view.others_alive();
  std::map<std::string, record_list> by_node;
  auto place = [&](job_record rec) {
    std::vector<std::string> stay;
    for (auto& h : rec.replicas)
      if (h != st.self_node())
        stay.push_back(h);
    // One new holder beyond the ones that stay (which may be dead and not yet known).
    auto want = holders_for(rec.id.str(), stay, {}, others, stay.size() + 1, {st.self_node()});
    auto before = rec.replicas;
    // The copy names its new holder: it is a holder there (it may adopt the job when the
    // holders that stay turn out to be dead).
    rec.replicas = want;
    for (auto& n : want)
      if (std::find(before.begin(), before.end(), n) == before.end())
        by_node[n].push_back(rec);
    return rec;
  };
  for (auto& [id, rec] : st.book.owned_all())
    if (is_final(rec.state))
      place(rec);
  for (auto& [id, h] : st.book.held_all())
    place(h.rec);
  st.custody_pending = 0;
  for (auto& [node, list] : by_node)
    for_each_page(list, [&, node = node](record_list page) {
      ++st.custody_pending;
      auto n = page.size();
      ask_node(self, st.membership, node, verb::peer_replicate,
               encode(replicate_request{st.self_node(), std::move(page)}),
               peer_timeout::replicate)
        .then(
          [=](const std::string&) {
            --self->state.custody_pending;
            check_drained(self);
          },
          [=](const caf::error& err) {
            self->state.log->warn("draining: {} copies to {} failed ({}); their other holders "
                                  "keep them",
                                  n, node, describe(err));
            --self->state.custody_pending;
            check_drained(self);
          });
    });
  if (st.custody_pending > 0)
    st.log->info("draining: copying the records held here to the members that stay ({} "
                 "pages)",
                 st.custody_pending);
}

} // namespace

void check_drained(coordinator_actor* self) {
  auto& st = self->state;
  if (!st.leaving || st.leave_signalled)
    return;
  std::vector<job_id> ids;
  for (auto& [id, rec] : st.book.owned_all())
    ids.push_back(id);
  hand_over(self, ids); // e.g. a failed attempt requeued for a retry
  if (!st.running.empty() || !st.finals.empty())
    return;
  for (auto& [attempt, p] : st.parts)
    if (p.status.state == "running" || !p.reported)
      return; // a gang part run here for another owner: it ends, and its owner hears of it
  for (auto& [id, rec] : st.book.owned_all())
    if (!is_final(rec.state))
      return; // not handed over yet
  if (st.custody_pending < 0)
    hand_over_copies(self);
  if (st.custody_pending > 0)
    return; // the copies are on their way
  st.leave_signalled = true;
  st.log->warn("drained: no attempt runs here any more and the jobs are handed over; leaving");
  // Give the hand-over's replication a moment, then leave as on SIGTERM.
  self->delayed_send(self, std::chrono::seconds(1), atoms::shutdown::value, std::string("drain"));
}

void on_drain(coordinator_actor* self, caf::response_promise rp, const id_request& req) {
  auto& st = self->state;
  // NODE: a node's name, id (or a unique prefix of one) or address.
  auto hits = find_members(st.view.members(), req.id);
  if (hits.empty() && (req.id == st.self_node() || req.id == st.cfg.address))
    hits.push_back(nullptr);
  if (hits.size() > 1) {
    std::string names;
    for (auto* m : hits)
      names += (names.empty() ? "" : ", ") + (m->name.empty() ? m->node : m->name);
    return rp.deliver(make_error(errc::bad_request, "drain: '" + req.id + "' is ambiguous: it names "
                                                      + std::to_string(hits.size()) + " nodes ("
                                                      + names + ")"));
  }
  if (hits.empty())
    return rp.deliver(make_error(errc::not_found, "drain: no node '" + req.id
                                                    + "' in the cluster (see monkey nodes)"));
  auto target = hits.front() ? hits.front()->node : st.self_node();
  if (target != st.self_node()) {
    if (req.local)
      return rp.deliver(make_error(errc::not_found, "drain: this node is not " + req.id));
    // Membership judges whether the target is alive (it refuses a dead or departed one):
    // this coordinator's view may lag it by a moment, e.g. right after the node restarted.
    auto fwd = req;
    fwd.id = target;
    fwd.local = true;
    ask_node(self, st.membership, target, verb::drain, encode(fwd), std::chrono::seconds(10))
      .then([=](std::string& body) mutable { rp.deliver(std::move(body)); },
            [=](caf::error& err) mutable {
              if (is(err, errc::unavailable))
                return rp.deliver(make_error(errc::refused, "drain: node " + target
                                                              + " is not alive (" + describe(err)
                                                              + ")"));
              rp.deliver(std::move(err));
            });
    return;
  }
  if (st.view.alive_nodes().size() <= 1)
    return rp.deliver(make_error(errc::refused, "drain: this node is the only one alive; "
                                                "there is nobody to hand its jobs to"));
  if (!st.leaving) {
    st.leaving = true;
    st.accepting = false;
    st.draining = false;
  }
  std::vector<job_id> ids;
  for (auto& [id, rec] : st.book.owned_all())
    ids.push_back(id);
  auto handed = hand_over(self, ids);
  auto running = st.running.size();
  check_drained(self);
  rp.deliver(reply(text_reply{
    "draining node " + st.self_node() + ": " + std::to_string(handed)
    + " queued jobs handed over; " + std::to_string(running)
    + " running attempts finish here; it leaves the cluster when they are done"}));
}

} // namespace monkey
