// SPDX-License-Identifier: Apache-2.0
// Journal writes, replication to the holders, and the commit of final states
// (docs/cluster.md, "Final states").
#include "actors/coordinator/state.hpp"

#include "actors/fan_out.hpp"
#include "runtime/ownership.hpp"

namespace monkey {

void write_local(coordinator_actor* self, record_list recs,
                 std::function<void(const caf::error&)> then) {
  write_batch batch;
  batch.records = std::move(recs);
  auto n = batch.records.size();
  self->request(self->state.journal, caf::infinite, atoms::write::value, std::move(batch))
    .then([=](bool) { then(caf::error{}); },
          [=](caf::error& err) {
            self->state.log->error("journal write of {} records failed: {}", n, describe(err));
            then(err);
          });
}

void apply_better(coordinator_actor* self, const std::vector<job_record>& better);

namespace {

/// Sends `recs` to their holders that are alive, other than this node and those in `skip`
/// (per record: holders known to have it); `done` gets the holders that stored each record.
void send_copies(coordinator_actor* self, const record_list& recs,
                 const std::map<job_id, std::set<std::string>>& skip,
                 std::chrono::milliseconds timeout, std::function<void(persist_result)> done) {
  auto& st = self->state;
  std::map<std::string, record_list> by_node;
  for (auto& r : recs) {
    auto sk = skip.find(r.id);
    for (auto& n : r.replicas)
      if (n != st.self_node() && st.view.alive(n) && (sk == skip.end() || !sk->second.count(n)))
        by_node[n].push_back(r);
  }
  auto result = std::make_shared<persist_result>();
  auto finish = [=] {
    // The fewest copies of any record: this node's, those known before, those stored now.
    result->copies = recs.empty() ? 1 : SIZE_MAX;
    for (auto& r : recs) {
      std::set<std::string> have = result->confirmed[r.id];
      if (auto sk = skip.find(r.id); sk != skip.end())
        have.insert(sk->second.begin(), sk->second.end());
      size_t n = 1;
      for (auto& h : r.replicas)
        if (h != self->state.self_node() && have.count(h))
          ++n;
      result->copies = std::min(result->copies, n);
    }
    done(std::move(*result));
  };
  if (by_node.empty() || !st.membership)
    return finish();
  auto pending = std::make_shared<size_t>(by_node.size());
  for (auto& [node, list] : by_node) {
    replicate_request req{st.self_node(), list};
    auto ids = std::make_shared<std::vector<job_id>>();
    for (auto& r : list)
      ids->push_back(r.id);
    auto target = node;
    ask_node(self, st.membership, node, verb::peer_replicate, encode(req), timeout)
      .then(
        [=](const std::string& body) {
          std::set<job_id> not_stored;
          if (auto r = decode<replicate_reply>(body, "replicate"))
            for (auto& rec : r->newer) {
              not_stored.insert(rec.id);
              result->better.push_back(rec);
            }
          for (auto& id : *ids)
            if (!not_stored.count(id))
              result->confirmed[id].insert(target);
          if (--*pending == 0)
            finish();
        },
        [=](const caf::error& err) {
          self->state.log->warn("replicating {} records to {} failed: {}", ids->size(), target,
                                describe(err));
          if (--*pending == 0)
            finish();
        });
  }
}

} // namespace

void replicate(coordinator_actor* self, const record_list& recs,
               std::function<void(persist_result)> done) {
  send_copies(self, recs, {}, peer_timeout::replicate, std::move(done));
}

void await_copies(coordinator_actor* self, std::vector<job_id> ids,
                  std::map<job_id, std::set<std::string>> confirmed,
                  std::function<void(size_t copies, size_t wanted)> done) {
  copies_wait w;
  w.ids = std::move(ids);
  w.confirmed = std::move(confirmed);
  w.deadline_ms = now_ms() + copies_settle_ms;
  w.done = std::move(done);
  self->state.copy_waits.push_back(std::move(w));
  check_copy_waits(self);
}

namespace {

/// Where a wait for copies stands: the fewest copies of its records, the holders wanted,
/// and the records some holder has not confirmed yet.
struct copies_count {
  size_t copies = SIZE_MAX;
  size_t wanted = 1;
  record_list missing;
  bool unsendable = false; ///< a record lacks copies that this node may not send any more
};

/// Replaces the holders of the wait's records that are declared dead (or gone), as a
/// membership change would, when this node may move records (a majority, synced); returns
/// the records it changed (to journal).
record_list replace_gone_holders(coordinator_state& st, const copies_wait& w) {
  record_list moved;
  if (!st.view.majority() || !st.synced)
    return moved;
  for (auto& id : w.ids) {
    auto* rec = st.book.owned(id);
    if (!rec || st.finals.count(id))
      continue; // not this node's any more (its new owner answers), or a commit moves it
    auto want = refreshed_holders(st, *rec);
    if (want == rec->replicas)
      continue;
    auto r = *rec;
    r.replicas = std::move(want);
    if (!is_final(r.state))
      r.version += 1;
    st.book.own(r);
    moved.push_back(std::move(r));
  }
  return moved;
}

copies_count count_copies(coordinator_state& st, const copies_wait& w) {
  copies_count c;
  for (auto& id : w.ids) {
    // A record this node no longer owns (fenced, or given up to a copy that stands over
    // it) is counted as it was last seen here, and not sent again by this node.
    auto* rec = st.book.find(id);
    if (!rec) {
      c.copies = 1;
      continue;
    }
    bool mine = st.book.owns(id);
    auto have = w.confirmed.find(id);
    size_t n = 1;
    bool lacks = false;
    for (auto& h : rec->replicas)
      if (h != st.self_node()) {
        if (have != w.confirmed.end() && have->second.count(h))
          ++n;
        else
          lacks = true;
      }
    c.copies = std::min(c.copies, n);
    c.wanted = std::max(c.wanted, rec->replicas.size());
    if (lacks && mine)
      c.missing.push_back(*rec);
    else if (lacks)
      c.unsendable = true;
  }
  if (c.copies == SIZE_MAX)
    c.copies = c.wanted;
  return c;
}

/// Asks the holders of `missing` that have not confirmed yet (a suspect one is skipped
/// until it is declared alive or dead), after journaling the records whose holders moved.
void ask_holders_again(coordinator_actor* self, std::list<copies_wait>::iterator w,
                       record_list missing, record_list moved, int64_t now) {
  w->in_flight = true;
  w->next_try_ms = now + 500;
  auto timeout = std::chrono::milliseconds(
    std::clamp<int64_t>(w->deadline_ms - now + 500, 500,
                        std::chrono::milliseconds(peer_timeout::replicate).count()));
  auto send = [=] {
    send_copies(self, missing, w->confirmed, timeout, [=](persist_result r) {
      apply_better(self, r.better);
      for (auto& [id, nodes] : r.confirmed)
        w->confirmed[id].insert(nodes.begin(), nodes.end());
      w->in_flight = false; // (a wait is erased only when not in flight)
    });
  };
  if (moved.empty())
    send();
  else
    write_local(self, std::move(moved), [=](const caf::error&) { send(); });
}

} // namespace

void check_copy_waits(coordinator_actor* self) {
  auto& st = self->state;
  auto now = now_ms();
  for (auto it = st.copy_waits.begin(); it != st.copy_waits.end();) {
    if (it->in_flight || now < it->next_try_ms) {
      ++it;
      continue;
    }
    auto moved = replace_gone_holders(st, *it);
    auto c = count_copies(st, *it);
    if ((c.missing.empty() && !c.unsendable) || now >= it->deadline_ms) {
      if (!moved.empty())
        persist(self, std::move(moved)); // its new holders still get it, unanswered
      auto done = std::move(it->done);
      it = st.copy_waits.erase(it);
      done(c.copies, c.wanted);
      continue;
    }
    if (c.missing.empty()) { // only records this node may not send: the deadline answers
      it->next_try_ms = now + 500;
      ++it;
      continue;
    }
    ask_holders_again(self, it, std::move(c.missing), std::move(moved), now);
    ++it;
  }
}

/// Copies that holders answered with (they stand over what this node sent): applied like
/// any copy from another node, and journaled.
void apply_better(coordinator_actor* self, const std::vector<job_record>& better) {
  if (better.empty())
    return;
  auto store = apply_incoming(self, better, nullptr);
  if (!store.empty())
    write_local(self, std::move(store), [](const caf::error&) {});
}

void persist(coordinator_actor* self, record_list recs,
             std::function<void(const persist_result&)> then) {
  auto copy = recs;
  write_local(self, std::move(recs), [=](const caf::error& err) {
    if (err) {
      persist_result r;
      r.local = err;
      if (then)
        then(r);
      return;
    }
    replicate(self, copy, [=](persist_result r) {
      apply_better(self, r.better);
      if (then)
        then(r);
    });
  });
}

namespace {

void settle_final(coordinator_actor* self, const job_id& id, final_outcome outcome) {
  auto& st = self->state;
  auto it = st.finals.find(id);
  if (it == st.finals.end())
    return;
  auto then = std::move(it->second.then);
  st.finals.erase(it);
  for (auto& f : then)
    if (f)
      f(outcome);
  request_schedule(self); // its dependents may start now
}

void try_final(coordinator_actor* self, const job_id& id);

/// Holders that did not answer and are declared dead: after every alive member was asked
/// and none has a copy that stands over the final one, they are replaced by live members.
void replace_dead_holders(coordinator_actor* self, const job_id& id,
                          std::vector<std::string> dead) {
  fetch_best(self, {id}, [=](std::map<job_id, job_record> found, bool all) {
      auto& st = self->state;
      auto it = st.finals.find(id);
      auto* rec = st.book.owned(id);
      if (it == st.finals.end() || !rec)
        return;
      it->second.in_flight = false;
      auto b = found.find(id);
      if (b != found.end() && replica::stands_over(b->second, *rec)) {
        auto better = b->second;
        st.log->warn("job {}: a member has a copy that stands over this node's final state "
                     "(owner {}, version {}): the outcome here is void",
                     id.short_str(), better.owner.str(), better.version);
        settle_final(self, id, final_outcome::superseded);
        give_up(self, better, "another owner's copy stands over its final state");
        return;
      }
      if (!all)
        return; // not every alive member answered: ask again later
      std::vector<std::string> keep;
      for (auto& h : rec->replicas)
        if (std::find(dead.begin(), dead.end(), h) == dead.end())
          keep.push_back(h);
      rec->replicas = holders_for(id.str(), {st.self_node()}, keep, st.view.alive_nodes(),
                                  st.cfg.replicas);
      st.log->info("job {}: holders {} are dead; its final state goes to {} instead",
                   id.short_str(), dead.size(), rec->replicas.size() - 1);
      try_final(self, id);
    });
}

/// The holders of a final state have answered (or not): commit it here, void it (a copy
/// stands over it), replace dead holders, or ask again later.
void decide_final(coordinator_actor* self, const job_id& id, const job_record& snapshot,
                  const std::map<std::string, replica::holder_answer>& answers,
                  const std::optional<job_record>& better) {
  auto& st = self->state;
  auto it = st.finals.find(id);
  if (it == st.finals.end())
    return; // voided meanwhile (fenced, or given up)
  auto verdict = replica::decide_final(snapshot, st.self_node(), answers);
  if (verdict.kind == replica::final_verdict::superseded) {
    st.log->warn("job {}: a holder has a copy that stands over its final state ({}): "
                 "that owner's history stands and the outcome here is void",
                 id.short_str(), better ? better->owner.str() : "?");
    settle_final(self, id, final_outcome::superseded);
    if (better)
      give_up(self, *better, "a holder's copy stands over its final state");
    return;
  }
  if (verdict.kind == replica::final_verdict::wait) {
    std::vector<std::string> dead;
    for (auto& h : verdict.missing) {
      auto s = st.view.state_of(h);
      if (s == member_state::dead || s == member_state::left)
        dead.push_back(h);
    }
    if (!dead.empty() && dead.size() == verdict.missing.size() && st.view.majority())
      return replace_dead_holders(self, id, dead);
    auto& p = it->second;
    p.in_flight = false;
    auto backoff = std::min<int64_t>(5000, 250LL << std::min(p.tries, 5));
    p.next_try_ms = now_ms() + backoff;
    if (p.tries == 1 || p.tries % 10 == 0)
      st.log->warn("job {}: its final state waits for holders that did not answer ({} "
                   "missing, try {}); asking again in {} ms",
                   id.short_str(), verdict.missing.size(), p.tries, backoff);
    return;
  }
  write_local(self, {snapshot}, [=](const caf::error& err) {
    auto& st = self->state;
    auto it = st.finals.find(id);
    if (it == st.finals.end())
      return;
    if (!err)
      return settle_final(self, id, final_outcome::committed);
    // The holders have it; this node's journal failed: answer the waiters with the error,
    // and write it again later.
    auto then = std::move(it->second.then);
    it->second.then.clear();
    it->second.in_flight = false;
    it->second.next_try_ms = now_ms() + 1000;
    for (auto& f : then)
      if (f)
        f(final_outcome::failed);
  });
}

/// Asks holder `h` to store the final `snapshot`; `answer` gets how it answered.
void ask_to_store(coordinator_actor* self, const std::string& h, const job_record& snapshot,
                  std::function<void(replica::holder_answer, std::optional<job_record>)> answer) {
  auto& st = self->state;
  auto s = st.view.state_of(h);
  if (!st.membership || s == member_state::dead || s == member_state::left)
    return answer(replica::holder_answer::no_answer, std::nullopt);
  auto id = snapshot.id;
  ask_node(self, st.membership, h, verb::peer_replicate,
           encode(replicate_request{st.self_node(), {snapshot}}), peer_timeout::replicate)
    .then(
      [=](const std::string& body) {
        auto r = decode<replicate_reply>(body, "replicate");
        if (!r)
          return answer(replica::holder_answer::no_answer, std::nullopt);
        for (auto& n : r->newer)
          if (n.id == id)
            return answer(replica::holder_answer::had_better, n);
        answer(replica::holder_answer::stored, std::nullopt);
      },
      [=](const caf::error&) { answer(replica::holder_answer::no_answer, std::nullopt); });
}

void try_final(coordinator_actor* self, const job_id& id) {
  auto& st = self->state;
  auto it = st.finals.find(id);
  if (it == st.finals.end() || it->second.in_flight)
    return;
  auto* rec = st.book.owned(id);
  if (!rec || !is_final(rec->state))
    return settle_final(self, id, final_outcome::superseded);
  auto& p = it->second;
  p.in_flight = true;
  p.tries += 1;
  auto snapshot = *rec;
  std::vector<std::string> holders;
  for (auto& h : snapshot.replicas)
    if (h != st.self_node())
      holders.push_back(h);
  if (holders.empty())
    return decide_final(self, id, snapshot, {}, std::nullopt);
  auto answers = std::make_shared<std::map<std::string, replica::holder_answer>>();
  auto better = std::make_shared<std::optional<job_record>>();
  auto pending = std::make_shared<size_t>(holders.size());
  for (auto& h : holders)
    ask_to_store(self, h, snapshot, [=](replica::holder_answer a, std::optional<job_record> b) {
      (*answers)[h] = a;
      if (b)
        *better = std::move(b);
      if (--*pending == 0)
        decide_final(self, id, snapshot, *answers, *better);
    });
}

} // namespace

void commit_final(coordinator_actor* self, const job_id& id, job_record before,
                  std::function<void(final_outcome)> then) {
  auto& p = self->state.finals[id];
  if (p.then.empty() && !p.in_flight)
    p.before = std::move(before);
  if (then)
    p.then.push_back(std::move(then));
  try_final(self, id);
}

void retry_finals(coordinator_actor* self) {
  auto& st = self->state;
  auto now = now_ms();
  std::vector<job_id> due;
  for (auto& [id, p] : st.finals)
    if (!p.in_flight && p.next_try_ms <= now)
      due.push_back(id);
  for (auto& id : due)
    try_final(self, id);
}

record_list apply_incoming(coordinator_actor* self, const std::vector<job_record>& records,
                           replicate_reply* answer, bool confirmed) {
  auto& st = self->state;
  record_list store;
  for (auto& rec : records) {
    if (st.submitting.count(rec.id))
      continue; // this node's own submission, still being made durable
    bool owned = st.book.owns(rec.id);
    auto* mine = st.book.find(rec.id);
    // A final state this node has (committed, or being committed) is never replaced by
    // another final state: the sender's is void (it must not be committed twice).
    if (mine && is_final(mine->state) && is_final(rec.state)
        && replica::compare(*mine, rec) != 0) {
      if (answer)
        answer->newer.push_back(*mine);
      continue;
    }
    // An own record that waits for the sync after a restart or a fence: a copy that stands
    // over it replaces it there, and the sync decides.
    if (mine && !owned && st.book.unsynced().count(rec.id)) {
      if (replica::compare(rec, *mine) > 0) {
        if (rec.owner == st.cfg.node)
          st.book.park(rec);
        else
          st.book.hold(rec, confirmed);
        store.push_back(rec);
      } else if (answer && replica::compare(rec, *mine) < 0) {
        answer->newer.push_back(*mine);
      }
      continue;
    }
    auto v = replica::judge_incoming(mine, owned, rec, st.cfg.node);
    if (v.answer_mine && answer && mine)
      answer->newer.push_back(*mine);
    switch (v.action) {
      case replica::incoming_action::ignore:
        if (!owned && mine && replica::compare(*mine, rec) == 0 && confirmed)
          st.book.confirm(rec.id);
        break;
      case replica::incoming_action::store_replica: {
        st.book.hold(rec, confirmed);
        store.push_back(rec);
        // A copy of a job whose owner is gone (e.g. handed over by a draining holder after
        // the owner's death was handled here): the adoption check (or, for a final one, the
        // custody of its copies) runs again soon.
        auto os = st.view.state_of(rec.owner.str());
        if (os == member_state::dead || os == member_state::left)
          st.recheck_members = true;
        break;
      }
      case replica::incoming_action::take_ownership: {
        auto r = rec;
        auto run = st.running.find(r.id);
        bool runs_here = run != st.running.end() && !r.attempts.empty()
                         && run->second.attempt == r.attempts.back().number;
        if (run != st.running.end() && !runs_here)
          void_attempt(self, r.id, "its record moved on elsewhere");
        st.finals.erase(r.id);
        bool lost = r.state == job_state::running && !runs_here;
        if (lost)
          mark_lost(r, "attempt " + std::to_string(r.attempts.back().number)
                         + " no longer runs on this node (it restarted or was fenced since)",
                    now_ms());
        auto& now_mine = st.book.own(r);
        if (lost)
          persist(self, {now_mine});
        else
          store.push_back(now_mine);
        st.log->info("job {} is owned by this node now ({}, version {})", r.id.short_str(),
                     to_string(r.state), r.version);
        request_schedule(self);
        break;
      }
      case replica::incoming_action::give_up_ownership:
        give_up(self, rec, "a copy of owner " + rec.owner.str() + " stands over its record");
        store.push_back(rec);
        break;
    }
  }
  return store;
}

void give_up(coordinator_actor* self, const job_record& better, const std::string& why) {
  auto& st = self->state;
  auto id = better.id;
  auto* mine = st.book.owned(id);
  std::vector<std::string> old_holders;
  if (mine)
    old_holders = mine->replicas;
  if (st.running.count(id))
    void_attempt(self, id, why);
  if (auto it = st.finals.find(id); it != st.finals.end()) {
    auto then = std::move(it->second.then);
    st.finals.erase(it);
    for (auto& f : then)
      if (f)
        f(final_outcome::superseded);
  }
  if (mine)
    st.log->warn("job {}: {} (owner {}, version {}, {}): this node holds it as a replica now",
                 id.short_str(), why, better.owner.str(), better.version,
                 to_string(better.state));
  st.book.hold(better);
  write_local(self, {better}, [](const caf::error&) {});
  // The holders of the abandoned copy learn the better one too, so that they converge.
  std::vector<std::string> tell;
  for (auto& h : old_holders)
    if (h != st.self_node() && st.view.alive(h)
        && std::find(better.replicas.begin(), better.replicas.end(), h) == better.replicas.end())
      tell.push_back(h);
  for (auto& h : tell)
    if (st.membership)
      ask_node(self, st.membership, h, verb::peer_replicate,
             encode(replicate_request{st.self_node(), {better}}), peer_timeout::replicate)
      .then([](const std::string&) {}, [](const caf::error&) {});
  request_schedule(self);
}

} // namespace monkey
