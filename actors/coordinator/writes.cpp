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

void replicate(coordinator_actor* self, const record_list& recs,
               std::function<void(persist_result)> done) {
  auto& st = self->state;
  std::map<std::string, record_list> by_node;
  for (auto& r : recs)
    for (auto& n : r.replicas)
      if (n != st.self_node() && st.view.alive(n))
        by_node[n].push_back(r);
  auto copies = std::make_shared<std::map<job_id, size_t>>();
  for (auto& r : recs)
    (*copies)[r.id] = 1;
  auto result = std::make_shared<persist_result>();
  auto finish = [=] {
    result->copies = SIZE_MAX;
    for (auto& [id, n] : *copies)
      result->copies = std::min(result->copies, n);
    if (copies->empty())
      result->copies = 1;
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
    ask_node(self, st.membership, node, verb::peer_replicate, encode(req),
             peer_timeout::replicate)
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
              (*copies)[id] += 1;
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
  auto& st = self->state;
  auto others = st.view.others_alive();
  auto answered = std::make_shared<size_t>(0);
  auto better = std::make_shared<std::optional<job_record>>();
  fan_out(
    self, st.membership, others, verb::peer_fetch, encode(fetch_request{st.self_node(), {id}}),
    peer_timeout::fetch,
    [=](const peer_answer& a) {
      if (!a)
        return;
      auto r = decode<replicate_request>(*a.body, "fetch");
      if (!r)
        return;
      *answered += 1;
      auto* mine = self->state.book.owned(id);
      for (auto& rec : r->records)
        if (rec.id == id && mine && replica::compare(rec, *mine) > 0)
          *better = rec;
    },
    [=] {
      auto& st = self->state;
      auto it = st.finals.find(id);
      auto* rec = st.book.owned(id);
      if (it == st.finals.end() || !rec)
        return;
      it->second.in_flight = false;
      if (*better) {
        st.log->warn("job {}: a member has a copy that stands over this node's final state "
                     "(owner {}, version {}): the outcome here is void",
                     id.short_str(), (*better)->owner.str(), (*better)->version);
        auto b = **better;
        settle_final(self, id, final_outcome::superseded);
        give_up(self, b, "another owner's copy stands over its final state");
        return;
      }
      if (*answered < others.size())
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
  auto answers = std::make_shared<std::map<std::string, replica::holder_answer>>();
  auto better = std::make_shared<std::optional<job_record>>();
  auto decide = [=] {
    auto& st = self->state;
    auto it = st.finals.find(id);
    if (it == st.finals.end())
      return; // voided meanwhile (fenced, or given up)
    auto verdict = replica::decide_final(snapshot, st.self_node(), *answers);
    if (verdict.kind == replica::final_verdict::superseded) {
      st.log->warn("job {}: a holder has a copy that stands over its final state ({}): "
                   "that owner's history stands and the outcome here is void",
                   id.short_str(), *better ? (*better)->owner.str() : "?");
      auto b = *better;
      settle_final(self, id, final_outcome::superseded);
      if (b)
        give_up(self, *b, "a holder's copy stands over its final state");
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
      if (err) {
        // The holders have it; this node's journal failed: answer the waiters with the
        // error, and write it again later.
        auto then = std::move(it->second.then);
        it->second.then.clear();
        it->second.in_flight = false;
        it->second.next_try_ms = now_ms() + 1000;
        for (auto& f : then)
          if (f)
            f(final_outcome::failed);
        return;
      }
      settle_final(self, id, final_outcome::committed);
    });
  };
  if (holders.empty())
    return decide();
  auto pending = std::make_shared<size_t>(holders.size());
  for (auto& h : holders) {
    auto answer = [=](replica::holder_answer a) {
      (*answers)[h] = a;
      if (--*pending == 0)
        decide();
    };
    auto s = st.view.state_of(h);
    if (!st.membership || s == member_state::dead || s == member_state::left) {
      answer(replica::holder_answer::no_answer);
      continue;
    }
    ask_node(self, st.membership, h, verb::peer_replicate,
             encode(replicate_request{st.self_node(), {snapshot}}), peer_timeout::replicate)
      .then(
        [=](const std::string& body) {
          auto r = decode<replicate_reply>(body, "replicate");
          if (!r)
            return answer(replica::holder_answer::no_answer);
          for (auto& n : r->newer)
            if (n.id == id) {
              *better = n;
              return answer(replica::holder_answer::had_better);
            }
          answer(replica::holder_answer::stored);
        },
        [=](const caf::error&) { answer(replica::holder_answer::no_answer); });
  }
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
      case replica::incoming_action::store_replica:
        st.book.hold(rec, confirmed);
        store.push_back(rec);
        break;
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
