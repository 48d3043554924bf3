// SPDX-License-Identifier: Apache-2.0
// The cluster side of the coordinator: recovery from the journal, the sync of own records
// after a restart or a fence, membership changes (adoption, custody of final records,
// re-replication), copies from other nodes, anti-entropy, compaction. docs/cluster.md.
#include "actors/coordinator/state.hpp"

#include <csignal>
#include <dirent.h>
#include <filesystem>
#include <ftw.h>

#include "actors/checkpoints.hpp"
#include "actors/coordinator/anti_entropy.hpp"
#include "actors/fan_out.hpp"
#include "actors/worker.hpp"
#include "runtime/ownership.hpp"
#include "runtime/process/proc.hpp"

namespace monkey {

std::vector<std::string> refreshed_holders(const coordinator_state& st, const job_record& rec) {
  // Holders that are suspect stay: only a death verdict replaces one.
  std::vector<std::string> first{st.self_node()};
  for (auto& h : rec.replicas) {
    auto s = st.view.state_of(h);
    if (h != st.self_node() && (s == member_state::alive || s == member_state::suspect))
      first.push_back(h);
  }
  return holders_for(rec.id.str(), first, {}, st.view.alive_nodes(), st.cfg.replicas);
}

namespace {

/// True when other members hold copies of this record, which may have moved on while this
/// node was down (another node adopted the job): it must hear from them before running it.
bool needs_sync(const coordinator_state& st, const job_record& rec) {
  if (is_final(rec.state))
    return false;
  for (auto& n : rec.replicas)
    if (n != st.self_node())
      return true;
  return false;
}

std::string lost_cause(const coordinator_state& st, const job_record& rec) {
  auto& at = rec.attempts.back();
  if (at.id.node == st.cfg.node && at.id.incarnation == st.cfg.incarnation)
    return "attempt " + std::to_string(at.number) + " was stopped when this node was fenced ("
           + (st.fence_cause.empty() ? std::string("declared dead") : st.fence_cause) + ")";
  return "runtime restart: incarnation " + std::to_string(at.id.incarnation)
         + " of the runtime stopped while attempt " + std::to_string(at.number) + " ran";
}

/// The coordinator restarted inside a process that still runs the attempt: its worker is
/// started again to adopt the process (docs/supervision.md).
void readopt(coordinator_actor* self, job_record rec) {
  auto& st = self->state;
  auto& at = rec.attempts.back();
  if (at.id.node == st.cfg.node && at.id.incarnation == st.cfg.incarnation) {
    auto& seq = *st.cfg.attempt_seq; // never below an attempt of this process
    for (auto v = seq.load(); v < at.id.seq && !seq.compare_exchange_weak(v, at.id.seq);) {
    }
  }
  run_info run;
  run.attempt = at.number;
  run.attempt_id = at.id.str();
  run.use = need_of(rec.spec);
  run.end_ms = run_bound_s(rec.spec) > 0
                 ? at.started_ms + static_cast<int64_t>(run_bound_s(rec.spec) * 1000)
                 : no_end;
  run.gpus.assign(at.gpus.begin(), at.gpus.end());
  for (int g : run.gpus)
    st.free_gpus.erase(g);
  st.running[rec.id] = run;
  auto args = worker_args_for(st, rec, at);
  args.adopt = true;
  args.adopt_pid = at.pid;
  args.pgid = at.pgid;
  args.cgroup_dir = at.cgroup;
  auto id = rec.id;
  st.book.own(std::move(rec));
  spawn_worker_for(self, id, args);
}

/// With cgroups, whatever an earlier incarnation left in this node's cgroups dies too,
/// journaled or not (a crash between spawn and its commit leaves no pid behind); returns
/// the processes killed.
size_t kill_cgroup_leftovers(const coordinator_state& st) {
  size_t killed = 0;
  if (st.cfg.cgroup_base.empty())
    return killed;
  std::set<std::string> keep;
  for (auto& [id, run] : st.running)
    if (auto* rec = st.book.owned(id))
      keep.insert(rec->attempts.back().cgroup);
  auto dir = st.cfg.cgroup_base + "/monkey-" + st.cfg.node.str();
  if (auto* d = ::opendir(dir.c_str())) {
    while (auto* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == ".." || e->d_type != DT_DIR)
        continue;
      auto path = dir + "/" + name;
      if (!keep.count(path))
        killed += static_cast<size_t>(kill_leftovers(path, 0, 0));
    }
    ::closedir(d);
  }
  return killed;
}

/// Scratch directories of attempts that no longer run here (a crash or a kill -9 ended
/// them before their worker could remove them): removed; returns how many.
size_t remove_scratch_leftovers(const coordinator_state& st) {
  std::set<std::string> keep;
  for (auto& [id, run] : st.running)
    if (auto* rec = st.book.owned(id); rec && !rec->attempts.empty())
      keep.insert(scratch_dir(st, id, rec->attempts.back().number));
  auto dir = st.cfg.data_dir + "/scratch";
  std::vector<std::string> gone;
  if (auto* d = ::opendir(dir.c_str())) {
    while (auto* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != ".." && !keep.count(dir + "/" + name))
        gone.push_back(dir + "/" + name);
    }
    ::closedir(d);
  }
  for (auto& path : gone) {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  return gone.size();
}

} // namespace

void recover(coordinator_actor* self, record_list& recs) {
  auto& st = self->state;
  record_list changed;
  size_t lost = 0, readopted = 0, killed = 0, held = 0, unsynced = 0;
  for (auto& rec : recs) {
    if (rec.owner != st.cfg.node) { // a replica of another owner's job: maybe stale
      ++held;
      st.book.hold(std::move(rec), false);
      continue;
    }
    bool ran = rec.state == job_state::running && !rec.attempts.empty();
    bool same_process = ran && rec.attempts.back().id.node == st.cfg.node
                        && rec.attempts.back().id.incarnation == st.cfg.incarnation;
    // A gang across nodes: its parts' nodes stopped them when this coordinator stopped
    // polling; the gang starts anew.
    if (same_process && spans_nodes(rec.attempts.back(), st.self_node()))
      same_process = false;
    if (same_process) {
      readopt(self, std::move(rec)); // this process still runs it: the coordinator restarted
      ++readopted;
      continue;
    }
    if (ran) // an earlier incarnation ran it: whatever is left of it dies before any re-run
      killed += static_cast<size_t>(kill_leftovers(rec.attempts.back().cgroup,
                                                   rec.attempts.back().pgid,
                                                   rec.attempts.back().start_ticks));
    if (needs_sync(st, rec)) {
      ++unsynced;
      st.book.park(std::move(rec));
      continue;
    }
    if (ran) {
      mark_lost(rec, lost_cause(st, rec), now_ms());
      ++lost;
      changed.push_back(rec);
    }
    st.book.own(std::move(rec));
  }
  killed += kill_cgroup_leftovers(st);
  if (auto n = remove_scratch_leftovers(st))
    st.log->info("removed {} scratch director{} of attempts that no longer run here", n,
                 n == 1 ? "y" : "ies");
  st.log->info("recovered {} jobs from the journal: {} lost attempts requeued or ended, {} "
               "leftover processes killed, {} running attempts re-adopted; {} replicas of "
               "other owners' jobs; {} jobs wait to hear from the cluster",
               st.book.owned_all().size(), lost, killed, readopted, held, unsynced);
  st.synced = st.book.unsynced().empty();
  st.sync_deadline_ms = now_ms() + 5000;
  if (!changed.empty())
    persist(self, std::move(changed), [=](const persist_result&) { request_schedule(self); });
  else
    request_schedule(self);
}

// ---- sync: own records read back after a restart, or kept through a fence -------------

namespace {

void sync_done(coordinator_actor* self);

/// An own record whose cluster was asked: kept (and now recovered) or given up.
void finish_sync(coordinator_actor* self, const job_id& id, const job_record* best) {
  auto& st = self->state;
  auto parked = st.book.unpark(id);
  if (!parked)
    return;
  auto rec = std::move(*parked);
  if (best && replica::sync_takes(*best, rec)) {
    if (best->owner != st.cfg.node) { // adopted, granted or handed over elsewhere
      st.log->info("job {} moved on while this node was away (owner {}, {}): holding it as a "
                   "replica",
                   id.short_str(), best->owner.str(), to_string(best->state));
      st.book.hold(*best);
      write_local(self, {*best}, [](const caf::error&) {});
      return;
    }
    rec = *best; // a holder has this node's own later transitions (a final state first)
  }
  if (is_final(rec.state)) {
    st.book.own(rec);
    persist(self, {rec}); // makes sure every holder has the final record
    return;
  }
  if (rec.state == job_state::running && !rec.attempts.empty())
    mark_lost(rec, lost_cause(st, rec), now_ms());
  else
    touch(rec, rec.state, rec.reason, now_ms());
  rec.replicas = refreshed_holders(st, rec);
  st.book.own(rec);
  persist(self, {rec}, [=](const persist_result&) { request_schedule(self); });
}

/// An own record that never got past "submitted" and has a client key: its submission may
/// never have been acknowledged (this node died or froze before it could answer), and the
/// client's retry through another node may have created the job anew. If another job with
/// the same key exists in the cluster, this record is dropped: one job per key.
void finish_sync_of_submission(coordinator_actor* self, const job_id& id) {
  auto& st = self->state;
  auto it = st.book.unsynced().find(id);
  if (it == st.book.unsynced().end())
    return;
  jobs_with_key(self, it->second.client_key, [=](std::set<job_id> others) {
    auto& st = self->state;
    others.erase(id);
    if (others.empty())
      return finish_sync(self, id, nullptr);
    auto parked = st.book.unpark(id);
    if (!parked)
      return;
    st.log->warn("dropped job {}: its submission (client key {}) was never acknowledged, and "
                 "the client's retry created job {}",
                 id.short_str(), parked->client_key, others.begin()->short_str());
    st.book.erase(id);
    write_batch batch;
    batch.erase.push_back(id);
    self->request(st.journal, caf::infinite, atoms::write::value, std::move(batch))
      .then([](bool) {}, [](const caf::error&) {});
    sync_done(self);
  });
}

void sync_done(coordinator_actor* self) {
  auto& st = self->state;
  if (st.book.unsynced().empty() && !st.synced) {
    st.synced = true;
    st.log->info("every recovered job heard from the cluster");
    on_members(self);
    request_schedule(self); // nothing started while the sync ran
  }
}

} // namespace

void fetch_best(coordinator_actor* self, const std::vector<job_id>& ids,
                std::function<void(std::map<job_id, job_record>, bool)> then) {
  auto& st = self->state;
  auto others = st.view.others_up();
  auto best = std::make_shared<std::map<job_id, job_record>>();
  auto answered = std::make_shared<size_t>(0);
  fan_out(
    self, st.membership, others, verb::peer_fetch, encode(fetch_request{st.self_node(), ids}),
    peer_timeout::fetch,
    [=](const peer_answer& a) {
      if (!a)
        return;
      auto r = decode<replicate_request>(*a.body, "fetch");
      if (!r)
        return;
      *answered += 1;
      drop_forgotten(self, r->records, a.node);
      for (auto& rec : r->records) {
        auto it = best->find(rec.id);
        if (it == best->end() || replica::stands_over(rec, it->second))
          (*best)[rec.id] = rec;
      }
    },
    [=] { then(std::move(*best), *answered == others.size()); });
}

void try_sync(coordinator_actor* self) {
  auto& st = self->state;
  if (st.synced || st.sync_in_flight)
    return;
  if (st.book.unsynced().empty())
    return sync_done(self);
  std::vector<job_id> ids;
  for (auto& [id, rec] : st.book.unsynced()) {
    ids.push_back(id);
    if (ids.size() >= 4096)
      break;
  }
  if (st.view.others_up().empty() || !st.membership) {
    // Alone: nobody can have moved its jobs on while it sees a majority (a single-node
    // cluster, or the others gone for good); wait a little for joiners first.
    if (now_ms() >= st.sync_deadline_ms && st.view.majority()) {
      for (auto& id : ids)
        finish_sync(self, id, nullptr);
      sync_done(self);
    }
    return;
  }
  st.sync_in_flight = true;
  fetch_best(self, ids, [=](std::map<job_id, job_record> best, bool all) {
      auto& st = self->state;
      st.sync_in_flight = false;
      size_t waiting = 0;
      for (auto& id : ids) {
        auto it = best.find(id);
        auto* mine = st.book.find(id);
        if (!mine)
          continue;
        if (it != best.end() && replica::sync_takes(it->second, *mine))
          finish_sync(self, id, &it->second);
        else if (!all)
          ++waiting;
        else if (it == best.end() && mine->version == 1 && !mine->client_key.empty())
          finish_sync_of_submission(self, id); // nobody else has it: a lost acknowledgement?
        else
          finish_sync(self, id, nullptr);
      }
      if (waiting > 0)
        st.log->info("{} recovered jobs wait: not every alive member answered", waiting);
      if (!st.book.unsynced().empty())
        self->delayed_send(self, std::chrono::seconds(1), atoms::sync::value);
      sync_done(self);
    });
}

// ---- membership changes ------------------------------------------------------------------

namespace {

void adopt(coordinator_actor* self, job_record rec, const std::string& why) {
  auto& st = self->state;
  auto old_owner = rec.owner.str();
  rec.owner = st.cfg.node;
  // A new ownership term: every later version of the adopter stands over every version
  // the old owner may still write while cut off.
  rec.version = replica::next_term(rec.version);
  if (rec.state == job_state::running && !rec.attempts.empty())
    mark_lost(rec, "owner " + old_owner + " " + why + " while attempt "
                     + std::to_string(rec.attempts.back().number) + " ran; adopted by "
                     + st.self_node(),
              now_ms());
  else
    touch(rec, rec.state, rec.reason + "; adopted by " + st.self_node() + " (owner "
                            + old_owner + " " + why + ")",
          now_ms());
  rec.replicas = refreshed_holders(st, rec);
  st.log->info("adopted job {} from owner {} ({}): now {}", rec.id.short_str(), old_owner, why,
               to_string(rec.state));
  st.book.own(rec);
  persist(self, {rec}, [=](const persist_result&) { request_schedule(self); });
}

/// Before adopting, the copies of every alive member are read (this node's own may be
/// stale), and the copy that stands decides (replica::decide_adoption).
void adopt_checked(coordinator_actor* self, const job_id& id, const std::string& why) {
  auto& st = self->state;
  if (st.adopting.count(id))
    return;
  auto* h = st.book.held(id);
  if (!h)
    return;
  st.adopting.insert(id);
  fetch_best(self, {id}, [=](std::map<job_id, job_record> found, bool all) {
      auto& st = self->state;
      st.adopting.erase(id);
      auto* h = st.book.held(id);
      if (!h || !st.synced || !st.view.majority())
        return; // settled meanwhile (the new owner replicated it here), or no longer allowed
      auto mine = h->rec;
      auto best = mine;
      bool confirmed = h->confirmed;
      if (auto it = found.find(id); it != found.end()) {
        // compare() is a total order: the best copy ties or beats this node's iff some does
        confirmed = confirmed || replica::compare(it->second, mine) >= 0;
        if (replica::stands_over(it->second, mine)) {
          best = it->second;
          st.book.hold(best);
          write_local(self, {best}, [](const caf::error&) {});
        }
      }
      auto verdict = replica::decide_adoption(
        best, st.self_node(), all, confirmed,
        [&](const std::string& n) { return st.view.state_of(n); });
      switch (verdict) {
        case replica::adoption::adopt:
          return adopt(self, best, why);
        case replica::adoption::unknown:
          SPDLOG_LOGGER_DEBUG(st.log, "job {}: not every member answered; adoption waits",
                              id.short_str());
          st.recheck_members = true;
          return;
        case replica::adoption::unconfirmed:
          st.recheck_members = true;
          st.log->warn("job {}: its owner {} is gone, and this node's copy (read back from its "
                       "journal) is the only one: it may have been dropped as a holder; the "
                       "job waits for a holder to return",
                       id.short_str(), best.owner.str());
          return;
        default:
          return;
      }
    });
}

/// A final record whose owner is gone: the successor among its alive holders restores its
/// copies (every job with a live holder keeps min(R, alive) copies). A node with a copy that
/// does not name it, whose named holders are all gone, acts as a holder too.
void keep_custody(coordinator_actor* self, std::vector<job_record> finals) {
  auto& st = self->state;
  std::map<std::string, record_list> by_node;
  record_list changed;
  for (auto& rec : finals) {
    std::vector<std::string> alive;
    for (auto& h : rec.replicas)
      if (st.view.alive(h))
        alive.push_back(h);
    if (alive.empty())
      alive.push_back(st.self_node());
    auto want = std::min(st.cfg.replicas, st.view.alive_nodes().size());
    if (alive.size() >= want || successor(rec.id.str(), alive) != st.self_node())
      continue;
    auto before = rec.replicas;
    // The copies name their new holders (a holder that is not named would not act for it).
    rec.replicas = holders_for(rec.id.str(), alive, {}, st.view.alive_nodes(), st.cfg.replicas);
    for (auto& n : rec.replicas)
      if (n != st.self_node() && std::find(before.begin(), before.end(), n) == before.end())
        by_node[n].push_back(rec);
    st.book.hold(rec);
    changed.push_back(rec);
  }
  if (!changed.empty())
    write_local(self, std::move(changed), [](const caf::error&) {});
  for (auto& [node, list] : by_node)
    for_each_page(list, [&, node = node](record_list page) {
      ask_node(self, st.membership, node, verb::peer_replicate,
               encode(replicate_request{st.self_node(), std::move(page)}),
               peer_timeout::replicate)
        .then([](const std::string&) {}, [](const caf::error&) {});
    });
}

} // namespace

void on_members(coordinator_actor* self) {
  auto& st = self->state;
  gangs_on_members(self);
  if (!st.synced)
    try_sync(self);
  if (!st.view.majority() || !st.synced || !st.accepting)
    return; // a minority, or a node still syncing, neither adopts nor moves records
  std::vector<std::pair<job_id, std::string>> adopt_now;
  std::vector<job_record> orphaned_finals;
  for (auto& [id, h] : st.book.held_all()) {
    auto os = st.view.state_of(h.rec.owner.str());
    if (os != member_state::dead && os != member_state::left)
      continue;
    if (is_final(h.rec.state))
      orphaned_finals.push_back(h.rec);
    else
      adopt_now.push_back({id, os == member_state::left ? "left" : "died"});
  }
  for (auto& [id, why] : adopt_now)
    adopt_checked(self, id, why);
  if (!orphaned_finals.empty() && st.membership)
    keep_custody(self, std::move(orphaned_finals));
  // Re-replication of own records whose holders are gone (declared dead or left).
  record_list refresh;
  for (auto& [id, rec] : st.book.owned_all()) {
    if (st.finals.count(id))
      continue; // its commit replaces dead holders itself
    auto want = refreshed_holders(st, rec);
    if (want == rec.replicas)
      continue;
    auto r = rec;
    r.replicas = want;
    if (!is_final(r.state))
      r.version += 1; // a final record keeps its version: only its copies move
    st.book.own(r);
    refresh.push_back(std::move(r));
  }
  if (!refresh.empty()) {
    st.log->info("re-replicating {} jobs to restore {} holders each", refresh.size(),
                 st.cfg.replicas);
    for_each_page(refresh, [&](record_list page) { persist(self, std::move(page)); });
  }
}

// ---- copies from other nodes ---------------------------------------------------------------

void on_replicate(coordinator_actor* self, caf::response_promise rp, replicate_request req) {
  drop_forgotten(self, req.records, req.from);
  // Copies of jobs that ran, new here (a re-replication, a handoff, an anti-entropy
  // repair): their metric points are pulled from the sender once the copies are stored.
  auto fresh = new_with_history(self->state, req.records);
  replicate_reply answer;
  auto store = apply_incoming(self, req.records, &answer);
  if (store.empty())
    return rp.deliver(reply(answer));
  write_local(self, std::move(store),
              [=, from = std::move(req.from)](const caf::error& err) mutable {
    if (err)
      return rp.deliver(make_error(errc::journal_failure,
                                   "replica write failed: " + describe(err)));
    rp.deliver(reply(answer));
    pull_metrics(self, from, std::move(fresh));
  });
}

void on_fetch(coordinator_actor* self, caf::response_promise rp, const fetch_request& req) {
  auto& st = self->state;
  replicate_request out;
  out.from = st.self_node();
  for (auto& id : req.ids)
    if (auto* rec = st.book.find(id))
      out.records.push_back(*rec);
  rp.deliver(reply(out));
}

namespace {

std::vector<const job_record*> all_copies(const coordinator_state& st) {
  std::vector<const job_record*> out;
  out.reserve(st.book.size());
  for (auto& [id, rec] : st.book.owned_all())
    out.push_back(&rec);
  for (auto& [id, h] : st.book.held_all())
    out.push_back(&h.rec);
  return out;
}

} // namespace

void on_digest(coordinator_actor* self, caf::response_promise rp, const digest_request& req) {
  rp.deliver(reply(digest_page(all_copies(self->state), req.from, req.after, req.limit)));
}

namespace {

/// Sends `peer` this node's copies of `ids` (they stand over the peer's); copies it answers
/// with (newer still) are applied here.
size_t push_copies(coordinator_actor* self, const std::string& peer,
                   const std::vector<job_id>& ids) {
  auto& st = self->state;
  replicate_request push{st.self_node(), {}};
  for (auto& id : ids)
    if (auto* rec = st.book.find(id))
      push.records.push_back(*rec);
  if (push.records.empty())
    return 0;
  ask_node(self, st.membership, peer, verb::peer_replicate, encode(push),
           peer_timeout::replicate)
    .then(
      [=](const std::string& body) {
        if (auto rr = decode<replicate_reply>(body, "replicate"))
          apply_better(self, rr->newer);
      },
      [](const caf::error&) {});
  return push.records.size();
}

/// Fetches `peer`'s copies of `ids` (they stand over this node's) and applies them; `done`
/// gets how many were taken.
void fetch_copies(coordinator_actor* self, const std::string& peer, std::vector<job_id> ids,
                  std::function<void(size_t)> done) {
  auto& st = self->state;
  if (ids.empty())
    return done(0);
  ask_node(self, st.membership, peer, verb::peer_fetch,
           encode(fetch_request{st.self_node(), std::move(ids)}), peer_timeout::fetch)
    .then(
      [=](const std::string& body) {
        auto recs = decode<replicate_request>(body, "fetch");
        if (!recs)
          return done(0);
        drop_forgotten(self, recs->records, peer);
        auto fresh = new_with_history(self->state, recs->records);
        auto store = apply_incoming(self, recs->records, nullptr);
        auto taken = store.size();
        if (!store.empty())
          write_local(self, std::move(store), [=](const caf::error& err) {
            if (!err)
              pull_metrics(self, peer, fresh);
          });
        done(taken);
      },
      [=](const caf::error&) { done(0); });
}

} // namespace

void anti_entropy_step(coordinator_actor* self) {
  auto& st = self->state;
  if (!st.view.majority() || !st.synced || !st.membership || !st.accepting)
    return;
  auto peers = st.view.others_alive();
  if (peers.empty())
    return;
  auto peer = peers[st.ae_next++ % peers.size()];
  if (st.ae_in_flight.count(peer))
    return;
  st.ae_in_flight.insert(peer);
  digest_request req{st.self_node(), st.ae_cursor[peer], 512};
  auto done = [=](size_t taken, size_t sent) {
    auto& st = self->state;
    st.ae_in_flight.erase(peer);
    if (taken + sent > 0)
      st.log->info("anti-entropy with {}: took {} records that stand over this node's, sent {}",
                   peer, taken, sent);
  };
  ask_node(self, st.membership, peer, verb::peer_digest, encode(req), peer_timeout::fetch)
    .then(
      [=](const std::string& body) {
        auto& st = self->state;
        auto r = decode<digest_reply>(body, "digest");
        if (!r)
          return done(0, 0);
        st.ae_cursor[peer] = r->more && !r->entries.empty() ? r->entries.back().id.str() : "";
        // Entries equal to this node's copies confirm them (the peer lists this node as a
        // holder of that very copy).
        for (auto& e : r->entries)
          if (auto* h = st.book.held(e.id);
              h && replica::compare(stamp_of(e), replica::stamp_of(h->rec)) == 0)
            st.book.confirm(e.id);
        auto diff = diff_page(*r, [&](const job_id& id) { return st.book.find(id); });
        auto sent = push_copies(self, peer, diff.push);
        fetch_copies(self, peer, std::move(diff.fetch), [=](size_t taken) { done(taken, sent); });
      },
      [=](const caf::error&) { done(0, 0); });
}

// ---- retention -----------------------------------------------------------------------------

namespace {

int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  return ::remove(path);
}

} // namespace

void compact(coordinator_actor* self) {
  auto& st = self->state;
  auto cutoff = now_ms() - st.cfg.retention_ms;
  // Keep records that unfinished jobs still depend on (a running job may be queued again
  // by a retry, and then checks its dependencies again), in memory and in the journal.
  std::set<job_id> needed;
  for (auto& [id, rec] : st.book.owned_all())
    if (!is_final(rec.state))
      for (auto& d : rec.spec.after)
        needed.insert(d.job);
  std::vector<job_id> gone;
  for (auto& [id, rec] : st.book.owned_all())
    if (is_final(rec.state) && rec.updated_ms < cutoff && !needed.count(id) && !st.finals.count(id))
      gone.push_back(id);
  for (auto& [id, h] : st.book.held_all())
    if (is_final(h.rec.state) && h.rec.updated_ms < cutoff && !needed.count(id))
      gone.push_back(id);
  for (auto& id : gone) {
    st.book.erase(id);
    // The job's logs follow its record (they are on the node that ran the attempt).
    auto dir = st.cfg.data_dir + "/logs/" + id.str();
    ::nftw(dir.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  }
  // What was learned of other owners' jobs is kept only while a queued job depends on it.
  for (auto it = st.remote.begin(); it != st.remote.end();)
    if (!needed.count(it->first) && !it->second.asking)
      it = st.remote.erase(it);
    else
      ++it;
  for (auto it = st.withdrawn.begin(); it != st.withdrawn.end();)
    if (it->second < now_ms())
      it = st.withdrawn.erase(it);
    else
      ++it;
  self->request(st.journal, caf::infinite, atoms::compact::value, cutoff,
                id_list(needed.begin(), needed.end()))
    .then(
      [=](size_t) {
        if (!gone.empty())
          self->state.log->info("retention: {} finished jobs and their logs removed",
                                gone.size());
      },
      [=](const caf::error& err) {
        self->state.log->warn("compaction failed: {}", describe(err));
      });
}

// ---- the checkpoint store's collection ---------------------------------------------------

namespace {

/// Of `names`, those a record here refers to (store_entries_of).
std::set<std::string> used_here(const coordinator_state& st, const std::vector<std::string>& names) {
  std::set<std::string> wanted(names.begin(), names.end()), used;
  st.book.each_record([&](const job_record& rec) {
    for (auto& e : store_entries_of(rec))
      if (wanted.count(e))
        used.insert(e);
  });
  return used;
}

} // namespace

std::string on_store_refs(const coordinator_state& st, const store_refs_request& req) {
  auto used = used_here(st, req.names);
  return reply(store_refs_reply{{used.begin(), used.end()}});
}

void collect_store(coordinator_actor* self) {
  auto& st = self->state;
  // Only a node that knows the whole cluster's records decides: synced, in the majority,
  // and no member suspect or gone lately (its records may be the only ones that refer to
  // an entry: they come back with it, or are copied elsewhere within the wait).
  if (!st.synced || !st.view.known() || !st.view.majority() || !st.membership)
    return;
  auto now = now_ms();
  for (auto& m : st.view.members())
    if (m.node != st.view.self() && m.state != member_state::alive
        && (m.state == member_state::suspect || now - m.since_ms < st.cfg.store_keep_ms))
      return;
  auto ck = self->system().registry().get(caf::atom_from_string(checkpoints_name));
  if (!ck)
    return;
  self->request(caf::actor_cast<caf::actor>(ck), std::chrono::seconds(30),
                atoms::store_idle::value, st.cfg.store_keep_ms)
    .then(
      [=](std::vector<std::string> idle) {
        auto& st = self->state;
        auto used = used_here(st, idle);
        std::vector<std::string> unused;
        for (auto& e : idle)
          if (!used.count(e) && unused.size() < max_store_refs)
            unused.push_back(e);
        if (unused.empty())
          return;
        auto others = st.view.others_alive();
        auto keep = std::make_shared<std::set<std::string>>();
        auto unanswered = std::make_shared<std::vector<std::string>>();
        fan_out(
          self, st.membership, others, verb::peer_store_refs,
          encode(store_refs_request{unused}), peer_timeout::query,
          [=](const peer_answer& a) {
            auto r = a ? decode<store_refs_reply>(*a.body, "peer store refs")
                       : expected<store_refs_reply>(failure{describe(a.err)});
            if (!r)
              return unanswered->push_back(a.node + " (" + r.error() + ")");
            keep->insert(r->used.begin(), r->used.end());
          },
          [=] {
            if (!unanswered->empty()) {
              SPDLOG_LOGGER_DEBUG(self->state.log,
                                  "collection: not every member answered ({}); nothing removed",
                                  unanswered->front());
              return;
            }
            std::vector<std::string> drop;
            for (auto& e : unused)
              if (!keep->count(e))
                drop.push_back(e);
            if (!drop.empty())
              self->send(caf::actor_cast<caf::actor>(ck), atoms::store_drop::value, drop);
          });
      },
      [=](const caf::error& err) {
        SPDLOG_LOGGER_DEBUG(self->state.log, "collection: the store did not answer: {}",
                            describe(err));
      });
}

} // namespace monkey
