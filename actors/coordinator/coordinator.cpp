// SPDX-License-Identifier: Apache-2.0
// The coordinator actor: its message table, start, tick, worker restarts and shutdown.
// Each handler decodes a message and hands it to the file that owns the concern
// (state.hpp lists them).
#include "actors/coordinator/coordinator.hpp"

#include <csignal>
#include <unistd.h>

#include "actors/coordinator/state.hpp"
#include "actors/fan_out.hpp"
#include "actors/membership/membership.hpp"
#include "runtime/process/proc.hpp"
#include "runtime/wire/envelope.hpp"
#include "runtime/supervision/supervisor.hpp"

namespace monkey {

namespace {

/// One anti-entropy page, one round of offers and withdrawals every 5 ticks (1 s).
constexpr uint64_t every_second = 5;

/// Decodes the request of `env` as `Request` and hands it to `handle`, or answers
/// bad_request naming what is wrong.
template <class Request, class Handle>
void dispatch(caf::response_promise& rp, const envelope& env, const char* what, Handle handle) {
  auto req = decode<Request>(env.body, what);
  if (!req)
    return rp.deliver(make_error(errc::bad_request, req.error()));
  handle(std::move(*req));
}

void on_envelope(coordinator_actor* self, const envelope& env) {
  auto rp = self->make_response_promise();
  auto& st = self->state;
  switch (static_cast<verb>(env.verb)) {
    case verb::submit:
      return dispatch<submit_request>(rp, env, "submit", [&](submit_request r) {
        accept_submit(self, rp, std::move(r));
      });
    case verb::list:
      return dispatch<list_request>(rp, env, "jobs", [&](list_request r) { on_list(self, rp, r); });
    case verb::show:
      return dispatch<id_request>(rp, env, "show", [&](id_request r) { on_show(self, rp, r); });
    case verb::why:
      return dispatch<id_request>(rp, env, "why", [&](id_request r) { on_why(self, rp, r); });
    case verb::cancel:
      return dispatch<id_request>(rp, env, "cancel",
                                  [&](id_request r) { on_cancel(self, rp, r); });
    case verb::logs:
      return dispatch<logs_request>(rp, env, "logs",
                                    [&](logs_request r) { on_logs(self, rp, r); });
    case verb::peer_replicate:
      return dispatch<replicate_request>(rp, env, "peer replicate", [&](replicate_request r) {
        on_replicate(self, rp, std::move(r));
      });
    case verb::peer_digest:
      return dispatch<digest_request>(rp, env, "peer digest",
                                      [&](digest_request r) { on_digest(self, rp, r); });
    case verb::peer_fetch:
      return dispatch<fetch_request>(rp, env, "peer fetch", [&](fetch_request r) {
        if (r.ids.size() > 4096)
          return rp.deliver(make_error(errc::bad_request, "peer fetch: more than 4096 ids"));
        on_fetch(self, rp, r);
      });
    case verb::peer_reserve:
      return dispatch<replicate_request>(rp, env, "peer reserve", [&](replicate_request r) {
        on_reserve(self, rp, std::move(r));
      });
    case verb::peer_withdraw:
      return dispatch<id_request>(rp, env, "peer withdraw",
                                  [&](id_request r) { on_withdraw(self, rp, r); });
    case verb::peer_metrics:
      return dispatch<metrics_request>(rp, env, "peer metrics", [&](metrics_request r) {
        if (r.points.size() > 65536)
          return rp.deliver(make_error(errc::bad_request, "peer metrics: more than 65536 points"));
        store_metrics(self, std::move(r.points));
        rp.deliver(reply(true));
      });
    case verb::peer_metric_pull:
      return dispatch<fetch_request>(rp, env, "peer metric pull", [&](fetch_request r) {
        if (r.ids.size() > 4096)
          return rp.deliver(make_error(errc::bad_request, "peer metric pull: more than 4096 ids"));
        on_metric_pull(self, rp, r);
      });
    case verb::drain:
      return dispatch<id_request>(rp, env, "drain", [&](id_request r) { on_drain(self, rp, r); });
    case verb::app_report:
      return dispatch<app_report_request>(rp, env, "app report", [&](app_report_request r) {
        on_app_report(self, rp, std::move(r));
      });
    case verb::app_ready:
      return dispatch<app_ready_request>(rp, env, "app ready",
                                         [&](app_ready_request r) { on_app_ready(self, rp, r); });
    case verb::app_checkpoint:
      return dispatch<app_checkpoint_request>(rp, env, "app checkpoint",
                                              [&](app_checkpoint_request r) {
                                                on_app_checkpoint(self, rp, r);
                                              });
    case verb::peer_lease:
      return dispatch<lease_request>(rp, env, "peer lease",
                                     [&](lease_request r) { on_lease(self, rp, r); });
    case verb::peer_gang_start:
      return dispatch<gang_start_request>(rp, env, "peer gang start", [&](gang_start_request r) {
        on_gang_start(self, rp, std::move(r));
      });
    case verb::peer_gang_poll:
      return dispatch<gang_poll_request>(rp, env, "peer gang poll",
                                         [&](gang_poll_request r) { on_gang_poll(self, rp, r); });
    case verb::peer_forget:
      return dispatch<forget_request>(rp, env, "peer forget", [&](forget_request r) {
        if (r.ids.size() > 65536)
          return rp.deliver(make_error(errc::bad_request, "peer forget: more than 65536 ids"));
        on_forget(self, rp, r);
      });
    case verb::peer_store_refs:
      return dispatch<store_refs_request>(rp, env, "peer store refs", [&](store_refs_request r) {
        if (r.names.size() > max_store_refs)
          return rp.deliver(make_error(errc::bad_request,
                                       "peer store refs: more than "
                                         + std::to_string(max_store_refs) + " names"));
        rp.deliver(on_store_refs(st, r));
      });
    case verb::status:
    case verb::devices:
      return rp.deliver(reply(make_status(st)));
    default:
      return rp.deliver(make_error(errc::bad_request, "the coordinator does not answer verb "
                                                        + std::to_string(env.verb)));
  }
}


void on_tick(coordinator_actor* self) {
  auto& st = self->state;
  auto now = now_ms();
  if (st.last_tick_ms != 0 && now - st.last_tick_ms > 1200)
    st.hold_until = now + hold_after_pause_ms;
  st.last_tick_ms = now;
  ++st.ticks;
  offer_queued(self);
  if (st.ticks % every_second == 0) {
    anti_entropy_step(self);
    withdraw_unanswered(self);
    check_drained(self);
    if (!st.synced)
      try_sync(self);
    // Queued jobs are placed again each second: a dependency held here as a replica, or
    // owned elsewhere (asked again at most once a second), ends without telling this
    // node's placement.
    if (!st.book.queue().empty())
      request_schedule(self);
  }
  if (st.recheck_members && st.ticks % (2 * every_second) == 0) {
    st.recheck_members = false;
    on_members(self);
  }
  gang_tick(self);
  send_metrics(self);
  retry_finals(self);
  check_copy_waits(self);
  release_held(self);
  if (!st.shutdown_waiters.empty())
    maybe_finish_shutdown(self);
  self->delayed_send(self, std::chrono::milliseconds(200), atoms::tick::value);
}

void on_shutdown(coordinator_actor* self, bool drain) {
  auto& st = self->state;
  auto rp = self->make_response_promise();
  st.shutdown_waiters.push_back(rp);
  st.accepting = false;
  st.draining = drain;
  st.shutdown_deadline_ms = now_ms() + 10'000;
  if (!drain)
    for (auto& [id, run] : st.running) {
      if (run.gang)
        stop_gang(self, id, "requeued");
      else if (run.worker)
        self->send(run.worker, atoms::stop::value, std::string("requeued"));
      else
        run.stop_pending = "requeued";
    }
  if (!drain)
    for (auto& [a, p] : st.parts)
      if (p.worker && p.status.state == "running")
        self->send(p.worker, atoms::stop::value, std::string("requeued"));
  st.log->info("shutting down: {} running jobs {}", st.running.size(),
               drain ? "will be waited for" : "are stopped and requeued");
  maybe_finish_shutdown(self);
}

tree_node tree_of(coordinator_actor* self) {
  auto& st = self->state;
  tree_node me;
  me.name = "coordinator";
  me.kind = "coordinator";
  me.id = self->id();
  me.state = "running";
  for (auto& [id, run] : st.running) {
    tree_node w;
    if (run.gang) { // its ranks run in parts, shown under the nodes that host them
      w.name = "gang-" + id.short_str() + "-" + std::to_string(run.attempt);
      w.kind = "gang";
      w.state = "running on " + std::to_string(run.gang->parts.size()) + " nodes";
      me.children.push_back(std::move(w));
      continue;
    }
    w.name = "worker-" + id.short_str() + "-" + std::to_string(run.attempt);
    w.kind = "worker";
    w.id = run.worker ? run.worker.id() : 0;
    w.restarts = run.restarts;
    w.state = run.worker ? "running" : "starting";
    for (size_t i = 0; i < run.app_ranks.size(); ++i) { // the ranks in the job's app host
      tree_node r;
      r.name = "rank-" + std::to_string(run.app_ranks[i]);
      r.kind = "app:" + run.app_actors[i];
      r.state = "running";
      w.children.push_back(std::move(r));
    }
    me.children.push_back(std::move(w));
  }
  for (auto& [attempt, p] : st.parts) {
    tree_node w;
    w.name = "worker-" + p.job.short_str() + "-" + std::to_string(p.number);
    w.kind = "worker";
    w.id = p.worker ? p.worker.id() : 0;
    w.state = p.status.state == "running" ? "running part of a gang (owner "
                                              + node_label(st.view.members(), p.owner) + ")"
                                          : p.status.state;
    for (size_t i = 0; i < p.status.ranks.size() && i < p.status.actors.size(); ++i) {
      tree_node r;
      r.name = "rank-" + std::to_string(p.status.ranks[i]);
      r.kind = "app:" + p.status.actors[i];
      r.state = "running";
      w.children.push_back(std::move(r));
    }
    me.children.push_back(std::move(w));
  }
  return me;
}

/// `shown`: the path as the user gave it (`monkey kill core/coordinator/worker-…`).
caf::result<std::string> kill_worker(coordinator_actor* self, const std::string& name,
                                     const std::string& shown) {
  if (name.find("/rank-") != std::string::npos)
    return kill_rank(self, name);
  for (auto& [id, run] : self->state.running) {
    if ("worker-" + id.short_str() + "-" + std::to_string(run.attempt) != name)
      continue;
    if (run.gang)
      break;
    if (!run.worker)
      return make_error(errc::conflict, name + " is starting; try again");
    // Anonymously: an exit from the coordinator itself would first unlink the worker, and
    // its death would then never reach the exit handler that restarts it. Not with
    // exit_reason::kill either: CAF makes that reason fatal for linked actors too.
    caf::anon_send_exit(run.worker, caf::exit_reason::user_shutdown);
    auto* rec = self->state.book.owned(id);
    // The same form as the supervisors' answer (runtime/supervision/supervisor.cpp).
    if (rec && rec->spec.driver)
      return "killed " + shown + " (#" + std::to_string(run.worker.id())
             + "); the sweep's optimizer actor ends with it, and the attempt is requeued";
    return "killed " + shown + " (#" + std::to_string(run.worker.id())
           + "); its supervisor coordinator restarts it and it re-adopts pid "
           + std::to_string(rec ? rec->attempts.back().pid : 0);
  }
  for (auto& [attempt, p] : self->state.parts) {
    if ("worker-" + p.job.short_str() + "-" + std::to_string(p.number) != name || !p.worker)
      continue;
    // A gang part's worker is not re-adopted: its part ends (failed), and so does the
    // gang's attempt (the job's retries decide).
    caf::anon_send_exit(p.worker, caf::exit_reason::user_shutdown);
    return "killed " + shown + " (#" + std::to_string(p.worker.id())
           + "), the worker of a gang part: the part and its gang's attempt fail";
  }
  return make_error(errc::not_found, "no worker '" + name + "'");
}

caf::behavior coordinator_impl(coordinator_actor* self, coordinator_config cfg,
                               caf::actor journal, std::shared_ptr<launcher> launch) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.journal = std::move(journal);
  st.launch = std::move(launch);
  st.log = logger("coordinator");
  st.view = cluster_view{st.self_node()};
  for (int g : st.cfg.gpu_indices)
    st.free_gpus.insert(g);
  // Nothing else is handled until the journal has been read back: the tombstones of the
  // jobs deleted by `monkey rm` first, then the records.
  auto fail_recovery = [=](const caf::error& err) {
    self->state.log->critical("cannot recover from the journal: {}", describe(err));
    self->quit(err);
  };
  self->request(st.journal, caf::infinite, atoms::load_tombstones::value)
    .await(
      [=](id_list& gone) {
        self->state.tombstones.insert(gone.begin(), gone.end());
        self->request(self->state.journal, caf::infinite, atoms::load::value)
          .await(
            [=](record_list& recs) {
              recover(self, recs);
              subscribe_members(self, self->state.membership);
            },
            fail_recovery);
      },
      fail_recovery);
  self->set_down_handler([=](const caf::down_msg& dm) {
    auto& st = self->state;
    if (st.membership && st.membership.address() == dm.source) {
      st.membership = nullptr; // restarted by the node supervisor: subscribe again
      self->delayed_send(self, std::chrono::milliseconds(100), atoms::subscribe::value);
    }
  });
  self->set_exit_handler([=](const caf::exit_msg& em) {
    auto& st = self->state;
    for (auto& [attempt, p] : st.parts) {
      if (!p.worker || p.worker.address() != em.source)
        continue;
      if (em.reason == caf::exit_reason::normal)
        return;
      st.log->warn("worker of the gang part of job {} attempt {} died ({}); the part fails",
                   p.job.short_str(), p.number, caf::to_string(em.reason));
      auto killed = p.rec.attempts.empty()
                      ? 0
                      : signal_job(p.rec.attempts.back().cgroup, p.rec.attempts.back().pgid,
                                   SIGKILL);
      (void)killed;
      p.worker = nullptr;
      on_part_done(self, p, attempt_result{"failed", "its worker died ("
                                                       + caf::to_string(em.reason) + ")", {}});
      return;
    }
    for (auto& [id, run] : st.running) {
      if (!run.worker || run.worker.address() != em.source)
        continue;
      if (em.reason == caf::exit_reason::normal)
        return; // finished; its done message is on the way or applied
      auto jid = id;
      st.log->warn("worker of job {} attempt {} died ({}); restarting it to re-adopt its "
                   "process",
                   jid.short_str(), run.attempt, caf::to_string(em.reason));
      respawn_worker(self, jid);
      return;
    }
    // Not a worker: our supervisor (or a link) stops us.
    if (em.reason != caf::exit_reason::normal)
      self->quit(em.reason);
  });
  auto retention_tick = std::chrono::milliseconds(
    std::clamp<int64_t>(st.cfg.retention_ms / 10, 1000, 3600 * 1000));
  self->delayed_send(self, retention_tick, atoms::compact::value);
  // The store's collection: a few rounds per --store-keep (at most one a second, at least
  // one an hour).
  auto collect_tick = std::chrono::milliseconds(
    std::clamp<int64_t>(st.cfg.store_keep_ms / 4, 1000, 3600 * 1000));
  self->delayed_send(self, collect_tick, atoms::store_gc::value);
  self->send(self, atoms::tick::value);
  return {
    [=](const envelope& env) { on_envelope(self, env); },
    [=](atoms::schedule) { schedule(self); },
    [=](atoms::subscribe) { subscribe_members(self, self->state.membership); },
    [=](atoms::members, member_list& ms, bool majority, uint32_t agreed, uint32_t agreed_alive) {
      auto& st = self->state;
      if (majority != st.view.majority())
        st.log->warn(majority ? "this node sees a majority of the cluster again: it starts "
                                "attempts and accepts submissions"
                              : "this node cannot see a majority of the cluster: it starts no "
                                "new attempts and refuses submissions (running ones go on)");
      st.view.update(std::move(ms), majority, agreed, agreed_alive);
      if (majority)
        request_schedule(self);
      on_members(self);
    },
    [=](atoms::sync) { try_sync(self); },
    [=](atoms::fence, const std::string& why) {
      fence_jobs(self, why);
      return true;
    },
    [=](atoms::address, const std::string& addr) { self->state.cfg.address = addr; },
    [=](atoms::tree) { return encode(tree_of(self)); },
    [=](atoms::kill, const std::string& name) { return kill_worker(self, name, name); },
    [=](atoms::kill, const std::string& name, const std::string& shown) {
      return kill_worker(self, name, shown);
    },
    [=](atoms::reserve_round) { reserve_round(self); },
    [=](atoms::tick) { on_tick(self); },
    // A worker's metric points: journaled here, and sent on to the job's other holders
    // (batched each tick), so that every holder answers for them and they outlive this node.
    [=](atoms::metric, metric_batch& points) {
      auto& st = self->state;
      bool held = false;
      for (auto& p : points) {
        const job_record* rec = st.book.find(p.job);
        held = held || rec;
        if (!rec) // a gang part run for another owner: its holders keep the points
          if (auto* part = find_part(st, p.job, p.attempt))
            rec = &part->rec;
        if (rec)
          for (auto& h : rec->replicas)
            if (h != st.self_node())
              st.metrics_out.add(h, p);
      }
      if (held)
        self->send(st.journal, atoms::metric::value, std::move(points));
    },
    [=](atoms::started, const job_id& id, int32_t number, const launch_result& res) {
      if (auto* p = find_part(self->state, id, number))
        return on_part_started(self, *p, res);
      if (!hold(self))
        on_started(self, id, number, res);
    },
    [=](atoms::done, const job_id& id, int32_t number, const attempt_result& res) {
      // The attempt's last points go to the holders ahead of its outcome: once a final
      // state is committed (every holder stored it), every holder has the metrics too.
      send_metrics(self, true);
      if (auto* p = find_part(self->state, id, number))
        return on_part_done(self, *p, res);
      if (!hold(self))
        on_done(self, id, number, res);
    },
    // `monkey drain` is done here: leave through the runtime's SIGTERM path (the leave is
    // announced to the members; nothing runs here any more).
    [=](atoms::shutdown, const std::string&) { ::kill(::getpid(), SIGTERM); },
    [=](atoms::shutdown, bool drain) { on_shutdown(self, drain); },
    [=](atoms::compact) {
      compact(self);
      self->delayed_send(self, retention_tick, atoms::compact::value);
    },
    [=](atoms::store_gc) {
      collect_store(self);
      self->delayed_send(self, collect_tick, atoms::store_gc::value);
    },
  };
}

} // namespace

caf::actor spawn_coordinator(caf::actor_system& sys, coordinator_config cfg, caf::actor journal,
                             std::shared_ptr<launcher> launch) {
  return sys.spawn(coordinator_impl, std::move(cfg), std::move(journal), std::move(launch));
}

} // namespace monkey
