// SPDX-License-Identifier: Apache-2.0
// Placement on this node, attempt start and end, workers, voided attempts and fencing.
#include "actors/coordinator/state.hpp"

#include <algorithm>
#include <csignal>
#include <ctime>
#include <sys/stat.h>

#include "actors/coordinator/launch_env.hpp"
#include "actors/fan_out.hpp"
#include "actors/worker.hpp"
#include "runtime/apps/schema.hpp"
#include "runtime/net/auth.hpp"
#include "runtime/process/proc.hpp"

namespace monkey {

void request_schedule(coordinator_actor* self) {
  if (!self->state.schedule_queued) {
    self->state.schedule_queued = true;
    self->send(self, atoms::schedule::value);
  }
}

std::vector<std::string> members_with_room(const coordinator_state& st, const resources& need) {
  std::vector<std::string> fit;
  for (auto& m : st.view.members()) {
    if (m.node == st.self_node() || m.state != member_state::alive || m.cpus < need.cpus
        || m.gpus < need.gpus)
      continue;
    bool tagged = true; // its tags include the job's (an app job's: the app's build)
    for (auto& t : need.tags)
      tagged = tagged && std::find(m.tags.begin(), m.tags.end(), t) != m.tags.end();
    if (tagged)
      fit.push_back(m.node);
  }
  return fit;
}

resources per_worker(const job_spec& s) {
  resources r;
  r.cpus = s.cpus;
  r.mem_mb = s.mem_mb;
  r.gpus = s.gpus;
  r.gpu_mem_mb = s.gpu_mem_mb;
  r.tags = s.tags;
  if (!s.app.empty())
    r.tags.push_back(app_tag(s.app, s.app_build));
  return r;
}

resources need_of(const job_spec& s) {
  // Every worker on one node (a gang across nodes asks each node for its share).
  auto r = per_worker(s);
  r.cpus *= s.ranks();
  r.mem_mb *= s.ranks();
  r.gpus *= s.ranks();
  return r;
}

std::string job_log_dir(const coordinator_state& st, const job_id& id) {
  auto dir = st.cfg.data_dir + "/logs/" + id.str();
  ::mkdir((st.cfg.data_dir + "/logs").c_str(), 0755);
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

std::optional<job_state> known_state(const coordinator_state& st, const job_id& id) {
  if (st.finals.count(id))
    return job_state::running; // its final state is still being committed
  if (auto* rec = st.book.find(id))
    return rec->state;
  if (auto it = st.remote.find(id); it != st.remote.end() && it->second.exists
                                    && it->second.learned_ms > 0)
    return it->second.state;
  return std::nullopt;
}

void ask_dependencies(coordinator_actor* self, const std::vector<job_id>& ids) {
  auto& st = self->state;
  auto now = now_ms();
  std::vector<job_id> ask;
  for (auto& id : ids) {
    auto& r = st.remote[id];
    if (r.asking || now - r.learned_ms < 1000)
      continue;
    r.asking = true;
    ask.push_back(id);
  }
  if (ask.empty())
    return;
  fetch_best(self, ask, [=](std::map<job_id, job_record> found, bool all) {
      auto& st = self->state;
      auto now = now_ms();
      for (auto& id : ask) {
        auto& r = st.remote[id];
        r.asking = false;
        if (auto it = found.find(id); it != found.end()) {
          r.exists = true;
          r.state = it->second.state;
          r.learned_ms = now;
        } else if (all) {
          r.exists = false;
          r.learned_ms = now;
        }
      }
      request_schedule(self);
    });
}

namespace {

/// "14:03:27", local time, for `why`.
std::string clock_of(int64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof(buf), "%H:%M:%S", &tm);
  return buf;
}

} // namespace

std::vector<queued_job> placement_queue(coordinator_state& st, std::vector<job_id>* doomed,
                                        int64_t* next_backoff) {
  std::vector<queued_job> queue;
  queue.reserve(st.book.queue().size());
  auto now = now_ms();
  auto state_of = [&](const job_id& d) { return known_state(st, d); };
  bool members_down = !st.view.in_state(member_state::dead).empty()
                      || !st.view.in_state(member_state::suspect).empty();
  for (auto& [seq, id] : st.book.queue()) {
    auto* rec = st.book.owned(id);
    if (!rec)
      continue;
    if (next_backoff && rec->not_before_ms > now
        && (*next_backoff == 0 || rec->not_before_ms < *next_backoff))
      *next_backoff = rec->not_before_ms;
    queued_job q;
    q.id = id;
    q.priority = rec->spec.priority;
    q.submit_seq = rec->submit_seq;
    q.need = need_of(rec->spec);
    q.timeout_s = run_bound_s(rec->spec);
    if (!rec->spec.after.empty()) {
      auto deps = check_dependencies(*rec, state_of);
      if (deps.kind == dependency_check::never) {
        if (doomed)
          doomed->push_back(id);
        continue;
      }
      if (deps.kind == dependency_check::unknown) {
        q.blocked = deps.text;
        for (auto& d : deps.ask) {
          auto it = st.remote.find(d);
          if (it != st.remote.end() && !it->second.exists && it->second.learned_ms > 0) {
            if (!members_down) {
              if (doomed)
                doomed->push_back(id);
              break;
            }
            q.blocked = "waits for job " + d.short_str()
                        + ", which no alive member holds (members that are down may hold it)";
          }
        }
        if (doomed && !doomed->empty() && doomed->back() == id)
          continue;
      } else if (deps.kind == dependency_check::waiting) {
        q.blocked = deps.text;
      }
    }
    if (q.blocked.empty() && rec->not_before_ms > now) {
      q.blocked = "retry " + std::to_string(rec->retries_used) + " of "
                  + std::to_string(rec->spec.retries) + " waits for its backoff: it starts at "
                  + clock_of(rec->not_before_ms) + " (in "
                  + std::to_string((rec->not_before_ms - now + 999) / 1000) + " s)";
    }
    if (q.blocked.empty() && !st.accepting)
      q.blocked = "the node is draining: it starts no new attempts";
    if (q.blocked.empty() && st.gang_rounds.count(id))
      q.blocked = "its gang is being placed across nodes (leases asked)";
    if (q.blocked.empty())
      if (auto o = st.offered.find(id); o != st.offered.end())
        q.blocked = "offered to node " + o->second.target + " (a reservation request is "
                    + (o->second.unanswered ? "unanswered: it is being withdrawn" : "under way")
                    + ")";
    queue.push_back(std::move(q));
  }
  return queue;
}

std::vector<running_job> placement_running(const coordinator_state& st, bool leases) {
  std::vector<running_job> running;
  running.reserve(st.running.size() + st.parts.size() + (leases ? st.leases.size() : 0));
  for (auto& [id, run] : st.running)
    if (!run.gang) // a gang across nodes uses its parts' slots (below, on their nodes)
      running.push_back({id, run.use, run.end_ms});
  for (auto& [attempt, p] : st.parts)
    if (p.status.state == "running")
      running.push_back({p.job, p.use, p.end_ms});
  if (leases)
    for (auto& [lid, l] : st.leases) // held until committed or expired
      running.push_back({l.job, l.hold.use, l.hold.expires_ms});
  return running;
}

namespace {

/// Why a dependent job can never start (for a job in `doomed`).
std::string never_reason(coordinator_state& st, const job_record& rec) {
  auto deps = check_dependencies(rec, [&](const job_id& d) { return known_state(st, d); });
  if (deps.kind == dependency_check::never)
    return deps.text;
  for (auto& d : deps.ask)
    return "dependency " + d.short_str() + " no longer exists in the cluster (no member holds it)";
  return "a dependency can never be met";
}

} // namespace

/// The app host of `at` on this node, hosting `ranks` (docs/writing-apps.md).
app_host_launch app_host_for(const coordinator_state& st, const job_record& rec,
                             const attempt_record& at, std::vector<int32_t> ranks) {
  app_host_launch h;
  auto path = st.cfg.app_paths.find(rec.spec.app);
  h.executable = path == st.cfg.app_paths.end() ? std::string{} : path->second;
  h.node_address = st.cfg.address;
  h.attempt_key = to_hex(attempt_key(st.cfg.node_key, at.id.str()));
  h.ranks = std::move(ranks);
  h.env = st.cfg.app_host_env;
  return h;
}

namespace {

void start_attempt(coordinator_actor* self, const job_id& id) {
  auto& st = self->state;
  auto* rec = st.book.owned(id);
  if (!rec)
    return;
  st.book.dequeue(id);
  auto dir = job_log_dir(st, id);
  run_info run;
  run.use = need_of(rec->spec);
  for (int i = 0; i < rec->spec.gpus && !st.free_gpus.empty(); ++i) {
    run.gpus.push_back(*st.free_gpus.begin());
    st.free_gpus.erase(st.free_gpus.begin());
  }
  auto now = now_ms();
  auto& at = begin_attempt(*rec, attempt_id{st.cfg.node, st.cfg.incarnation, ++*st.cfg.attempt_seq},
                           now, dir, std::vector<int32_t>(run.gpus.begin(), run.gpus.end()));
  run.attempt = at.number;
  run.attempt_id = at.id.str();
  run.end_ms = run_bound_s(rec->spec) > 0
                 ? now + static_cast<int64_t>(run_bound_s(rec->spec) * 1000)
                 : no_end;
  auto gpus = run.gpus;
  st.running[id] = std::move(run);
  auto args = worker_args_for(st, *rec, at);
  args.request = launch_for(*rec, at, std::vector<int32_t>(gpus.begin(), gpus.end()), st.cfg.node,
                            st.cfg.cgroup_base);
  add_device_speed(args.request, st.cfg.devices, rec->spec,
                   std::vector<int32_t>(gpus.begin(), gpus.end()));
  if (!rec->spec.app.empty() || rec->spec.ranks() > 1) {
    std::vector<int32_t> ranks; // every rank on this node (for now)
    for (int32_t r = 0; r < rec->spec.ranks(); ++r)
      ranks.push_back(r);
    at.hosts = {st.cfg.node.str() + ":" + rank_list_text(ranks)};
    if (rec->spec.app.empty()) {
      // N copies of the command with torchrun's environment (runtime/process/gang.hpp).
      static const std::string runtime_exe = self_executable();
      add_gang_runner(args.request, *rec, at, runtime_exe, st.cfg.kill_grace.count());
    } else {
      add_app_host(args.request, *rec, at, app_host_for(st, *rec, at, ranks));
    }
  }
  // The child starts now; its record is journaled in the same grouped commit as its pid
  // soon after. A crash before that commit kills the child (PR_SET_PDEATHSIG) and, with
  // cgroups, everything it started (recovery empties the node's cgroups), so the job is
  // simply still queued: execution is at-least-once, the recorded result exactly-once.
  spawn_worker_for(self, id, args);
  persist(self, {*rec});
}

} // namespace

namespace {

/// Schedules a placement for `next`, when the earliest retry backoff ends (0: none waits).
void wake_for_backoff(coordinator_actor* self, int64_t next) {
  auto& st = self->state;
  auto now = now_ms();
  if (next == 0 || (st.backoff_wake_ms > now && st.backoff_wake_ms <= next))
    return;
  st.backoff_wake_ms = next;
  self->delayed_send(self, std::chrono::milliseconds(next - now + 5), atoms::schedule::value);
}

} // namespace

void schedule(coordinator_actor* self) {
  auto& st = self->state;
  st.schedule_queued = false;
  if (!st.accepting && !st.draining)
    return;
  if (!st.view.majority())
    return; // a minority starts no new attempts; running ones go on
  if (!st.synced)
    return; // back from the dead (fenced) or restarted: nothing starts before the sync ends
  std::vector<job_id> doomed;
  int64_t next_backoff = 0;
  auto queue = placement_queue(st, &doomed, &next_backoff);
  wake_for_backoff(self, next_backoff);
  std::vector<job_id> ask;
  for (auto& [seq, id] : st.book.queue())
    if (auto* rec = st.book.owned(id))
      for (auto& d : rec->spec.after)
        if (!st.book.find(d.job) && !st.finals.count(d.job))
          ask.push_back(d.job);
  if (!ask.empty())
    ask_dependencies(self, ask);
  for (auto& id : doomed) {
    auto* rec = st.book.owned(id);
    if (!rec)
      continue;
    auto before = *rec;
    auto why = never_reason(st, *rec);
    st.book.dequeue(id);
    touch(*rec, job_state::cancelled, why, now_ms());
    commit_final(self, id, before, [=](final_outcome) { request_schedule(self); });
  }
  // The hot path builds no explanations; `why` recomputes them when asked.
  // Gangs of other owners waiting for this node's slots keep their place (EASY): with any,
  // the own queue is ordered by submit time too, as the gangs are.
  auto judged = queue;
  if (auto waiting = lease_waiting(st); !waiting.empty())
    by_submit_time(st, judged).insert(judged.end(), waiting.begin(), waiting.end());
  auto plan = plan_placement(st.cfg.total, placement_running(st), std::move(judged), now_ms(),
                             false);
  for (auto& id : plan.start)
    start_attempt(self, id); // (a waiting gang's entry is no job here: nothing starts)
  // Gangs the local plan does not start: placed across nodes by leases (gangs.cpp).
  place_gangs(self, queue, plan);
}

std::string explain_wait(coordinator_state& st, const job_id& id) {
  if (auto g = gang_wait(st, id); !g.empty())
    return g;
  auto queue = placement_queue(st, nullptr);
  for (auto& q : queue)
    q.label = q.id.short_str();
  auto plan = plan_placement(st.cfg.total, placement_running(st), std::move(queue), now_ms(), true);
  if (auto it = plan.why.find(id); it != plan.why.end()) {
    auto* rec = st.book.owned(id);
    if (!rec)
      return it->second;
    auto need = need_of(rec->spec);
    if (never_fits(st.cfg.total, need).empty())
      return it->second;
    // It never fits here: it is offered to members with room, or waits for one to join.
    if (auto fit = members_with_room(st, need); !fit.empty())
      return it->second + "; it is offered to members with room (" + fit.front() + ", ...)";
    auto& spec = rec->spec;
    std::string what = std::to_string(need.cpus) + " cpus"
                       + (need.gpus > 0 ? " and " + std::to_string(need.gpus) + " gpus"
                                        : std::string{});
    if (!spec.app.empty())
      what = "app '" + spec.app + "' (build " + spec.app_build + ") and " + what + " ("
             + workers_text(spec) + " of " + std::to_string(spec.cpus)
             + " cpus" + (spec.gpus > 0 ? ", " + std::to_string(spec.gpus) + " gpus" : "")
             + ")";
    return "waits for a node with " + what + ": no alive member has room for it ("
           + it->second + "); it starts when such a node joins";
  }
  for (auto& s : plan.start)
    if (s == id)
      return "queued; it fits now and starts at the next placement";
  return "queued; placement runs next";
}

worker_args worker_args_for(const coordinator_state& st, const job_record& rec,
                            const attempt_record& at) {
  worker_args w;
  w.job = rec.id;
  w.attempt = at.number;
  w.timeout_s = rec.spec.timeout_s;
  w.started_ms = at.started_ms;
  w.stdout_path = at.log_out;
  w.mem_limit_mb = rec.spec.mem_mb;
  w.kill_grace = st.cfg.kill_grace;
  // Checkpoints (docs/checkpoints.md): a directory per attempt on this node; a retry or a
  // requeue (or a job started --checkpoint-from another) restores the newest checkpoint.
  w.ckpt.dir = checkpoint_dir(st, rec.id, at.number);
  w.ckpt.holders = rec.replicas;
  if (auto from = job_id::parse(rec.spec.checkpoint_from))
    w.ckpt.from = *from;
  w.ckpt.restore = at.number > 1 || !w.ckpt.from.empty();
  w.ckpt.capture = rec.spec.app.empty();
  w.in_node = rec.spec.driver; // a sweep: its optimizer actor runs in this node
  if (!rec.spec.ship.empty()) {
    w.ship = rec.spec.ship;
    w.ship_dir = scratch_dir(st, rec.id, at.number);
  }
  return w;
}

std::string scratch_dir(const coordinator_state& st, const job_id& id, int32_t attempt) {
  return st.cfg.data_dir + "/scratch/" + id.str() + "-" + std::to_string(attempt);
}

std::string checkpoint_dir(const coordinator_state& st, const job_id& id, int32_t attempt) {
  return st.cfg.data_dir + "/logs/" + id.str() + "/checkpoint-" + std::to_string(attempt);
}

void spawn_worker_for(coordinator_actor* self, const job_id& id, worker_args args) {
  auto& st = self->state;
  auto worker = spawn_worker(self->system(), std::move(args), caf::actor_cast<caf::actor>(self),
                             st.journal, st.launch);
  // Linked: a worker dies with its coordinator (the child process lives on and is
  // re-adopted); a worker's own crash reaches the coordinator's exit handler.
  self->link_to(worker);
  auto& run = st.running[id];
  run.worker = worker;
  if (!run.stop_pending.empty())
    self->send(worker, atoms::stop::value, run.stop_pending);
}

void respawn_worker(coordinator_actor* self, const job_id& id) {
  auto& st = self->state;
  auto* rec = st.book.owned(id);
  auto run = st.running.find(id);
  if (!rec || run == st.running.end() || rec->attempts.empty())
    return;
  auto& at = rec->attempts.back();
  auto args = worker_args_for(st, *rec, at);
  args.adopt = true;
  args.adopt_pid = at.pid;
  args.pgid = at.pgid;
  args.cgroup_dir = at.cgroup;
  run->second.worker = nullptr;
  run->second.restarts += 1;
  spawn_worker_for(self, id, args);
}

bool hold(coordinator_actor* self) {
  auto& st = self->state;
  auto now = now_ms();
  if (st.last_tick_ms != 0 && now - st.last_tick_ms > 1200) { // the tick itself is late
    st.hold_until = std::max(st.hold_until, now + hold_after_pause_ms);
    st.last_tick_ms = now;
  }
  // (A node shutting down has left the member list, and so sees no majority: its last
  // outcomes are written as a clean stop requires.)
  if (now >= st.hold_until && (st.view.majority() || !st.accepting))
    return false;
  // Paused, or cut off from the majority: the others may adopt this job meanwhile, so its
  // outcome waits (and is voided by fencing if they did).
  st.on_hold.push_back(self->current_mailbox_element()->copy_content_to_message());
  return true;
}

void release_held(coordinator_actor* self) {
  auto& st = self->state;
  if (st.on_hold.empty() || now_ms() < st.hold_until || !(st.view.majority() || !st.accepting))
    return;
  auto msgs = std::move(st.on_hold);
  st.on_hold.clear();
  for (auto& m : msgs)
    self->send(self, m);
}

void on_started(coordinator_actor* self, const job_id& id, int32_t number,
                const launch_result& res) {
  auto& st = self->state;
  auto* rec = st.book.owned(id);
  auto run = st.running.find(id);
  if (!rec || run == st.running.end() || run->second.attempt != number || rec->attempts.empty()
      || rec->attempts.back().number != number)
    return;
  auto& at = rec->attempts.back();
  at.pid = res.pid;
  at.pgid = res.pgid;
  at.start_ticks = res.start_ticks;
  at.cgroup = res.cgroup_dir;
  at.resumed_step = res.resumed_step;
  at.resumed_from = res.resumed_from;
  rec->version += 1;
  rec->updated_ms = now_ms();
  persist(self, {*rec});
}

void on_done(coordinator_actor* self, const job_id& id, int32_t number,
             const attempt_result& res) {
  auto& st = self->state;
  auto* rec = st.book.owned(id);
  auto run = st.running.find(id);
  // Not (or no longer) an attempt of this node: delivered twice, or voided meanwhile.
  if (!rec || run == st.running.end() || run->second.attempt != number)
    return;
  auto before = *rec;
  if (!end_attempt(*rec, number, attempt_end{res.outcome, res.cause, res.exit}, now_ms()))
    return;
  for (int g : run->second.gpus)
    st.free_gpus.insert(g);
  if (run->second.worker)
    self->unlink_from(run->second.worker);
  st.running.erase(run);
  attempt_ended(self, id, before);
  check_drained(self);
}

void attempt_ended(coordinator_actor* self, const job_id& id, const job_record& before) {
  auto& st = self->state;
  auto* rec = st.book.owned(id);
  if (!rec)
    return;
  st.book.requeue_if_queued(id);
  // Its slots are free now: place the next job without waiting for the commit. A
  // shutdown waits for it, so that no final state is lost at a clean stop.
  request_schedule(self);
  if (is_final(rec->state))
    commit_final(self, id, before, [=](final_outcome) { maybe_finish_shutdown(self); });
  else
    persist(self, {*rec}, [=](const persist_result&) { maybe_finish_shutdown(self); });
}

std::vector<queued_job>& by_submit_time(const coordinator_state& st, std::vector<queued_job>& queue) {
  for (auto& q : queue)
    if (auto* rec = st.book.owned(q.id))
      q.submit_seq = static_cast<uint64_t>(std::max<int64_t>(0, rec->submitted_ms));
  return queue;
}

size_t void_attempt(coordinator_actor* self, const job_id& id, const std::string& why) {
  auto& st = self->state;
  auto run = st.running.find(id);
  if (run == st.running.end())
    return 0;
  size_t killed = 0;
  if (auto* rec = st.book.find(id); rec && !rec->attempts.empty()) {
    auto& at = rec->attempts.back();
    killed = static_cast<size_t>(signal_job(at.cgroup, at.pgid, SIGKILL));
    if (!at.cgroup.empty())
      st.launch->retire_cgroup(at.cgroup);
  }
  for (int g : run->second.gpus)
    st.free_gpus.insert(g);
  if (run->second.worker) {
    self->unlink_from(run->second.worker);
    caf::anon_send_exit(run->second.worker, caf::exit_reason::user_shutdown);
  }
  stop_gang_parts(self, id, run->second, "cancelled");
  st.log->warn("attempt {} of job {} is void ({}): killed {} processes", run->second.attempt,
               id.short_str(), why, killed);
  st.running.erase(run);
  request_schedule(self);
  return killed;
}

size_t fence_jobs(coordinator_actor* self, const std::string& why) {
  auto& st = self->state;
  st.fence_cause = why;
  std::vector<job_id> runs;
  for (auto& [id, run] : st.running)
    runs.push_back(id);
  size_t killed = 0;
  for (auto& id : runs)
    killed += void_attempt(self, id, "fenced: " + why);
  killed += void_parts(self, "fenced: " + why); // parts run for owners that may have moved on
  st.on_hold.clear(); // outcomes of attempts that may have been adopted elsewhere: void
  // Final states not yet stored by every holder: the attempt's outcome is known, and a
  // holder may have stored it already (a final copy stands over every unfinished one), so it
  // is kept, not voided, and the sync decides: it is committed unless another final state
  // stands in the cluster (an adopter's), which this node then takes.
  auto finals = std::move(st.finals);
  st.finals.clear();
  for (auto& [id, p] : finals) {
    if (auto* rec = st.book.owned(id); rec && is_final(rec->state))
      st.book.park(*rec);
    else
      st.book.park(p.before);
    for (auto& f : p.then)
      if (f)
        f(final_outcome::superseded);
  }
  // Unfinished jobs, and jobs that finished in the last minute: their final record may not
  // have reached the holders before the pause, and a holder may have adopted them since.
  std::vector<job_id> own;
  auto recent = now_ms() - 60'000;
  for (auto& [id, rec] : st.book.owned_all())
    if (!is_final(rec.state) || (rec.updated_ms > recent && rec.replicas.size() > 1))
      own.push_back(id);
  for (auto& id : own)
    st.book.park(*st.book.owned(id));
  st.book.unconfirm_all();
  st.synced = false;
  st.sync_deadline_ms = now_ms() + 5000;
  st.log->warn("fenced: killed {} job processes of {} attempts ({}); {} jobs wait to hear from "
               "the cluster",
               killed, runs.size(), why, st.book.unsynced().size());
  self->delayed_send(self, std::chrono::milliseconds(500), atoms::sync::value);
  return own.size();
}

void maybe_finish_shutdown(coordinator_actor* self) {
  auto& st = self->state;
  if (st.accepting || st.shutdown_waiters.empty() || !st.running.empty())
    return;
  for (auto& [a, p] : st.parts)
    if (p.status.state == "running")
      return; // a gang part run here for another owner: it stops and its outcome is polled
  // Final states being committed are waited for (a clean stop loses none), for a while.
  if (!st.finals.empty() && now_ms() < st.shutdown_deadline_ms)
    return;
  if (!st.finals.empty())
    st.log->warn("shutting down with {} final states not confirmed by their holders: they "
                 "are recorded where they reached, and re-run otherwise",
                 st.finals.size());
  for (auto& rp : st.shutdown_waiters)
    rp.deliver(true);
  st.shutdown_waiters.clear();
}

} // namespace monkey
