// SPDX-License-Identifier: Apache-2.0
// Gangs across nodes (docs/cluster.md, "Gangs"): an app job or a command job of N workers
// whose workers do not start on its owner alone is placed by leases.
//
//   owner     plans the parts (runtime/gang_rules.hpp), asks each part's node for a lease
//             (peer_lease, with an expiry), then commits every lease (peer_gang_start) or
//             releases every one: no node runs a partial gang. It stays the job's only owner:
//             the parts' nodes are executors. It polls every part (peer_gang_poll), hands
//             the app hosts each other's endpoints once all are ready, and ends the attempt
//             when a part ends badly (the others are stopped), is lost (its node died or
//             forgot it: the gang is requeued), or when every part succeeded.
//   executor  grants a lease only if its own placement, with its queue and the leases it
//             holds judged in the gang order, starts it now; revokes later gangs' uncommitted
//             leases for an earlier gang; runs its part like an attempt of its own (worker,
//             process group, cgroup, logs), sends the part's metric points to the job's
//             holders, and stops a part whose owner died or stopped polling it.
#include "actors/coordinator/state.hpp"

#include "runtime/apps/exit_codes.hpp"

#include <csignal>
#include <limits>
#include <unistd.h>

#include "actors/coordinator/launch_env.hpp"
#include "actors/fan_out.hpp"
#include "runtime/apps/schema.hpp"
#include "runtime/net/auth.hpp"
#include "runtime/net/net_config.hpp"
#include "runtime/process/proc.hpp"

namespace monkey {

app_host_launch app_host_for(const coordinator_state& st, const job_record& rec,
                             const attempt_record& at, std::vector<int32_t> ranks);

namespace {

/// A queued gang that fits its owner waits this long for the local plan before it is
/// placed across nodes (a pass is scheduled for then: a one-worker app job submitted to a
/// busy node, a sweep's trial, starts on a free one within a few hundred ms).
constexpr int64_t place_after_ms = 200;
constexpr size_t rounds_in_flight = 4;
/// A gang refused a lease here is judged ahead of later gangs for this long after its last
/// ask (its owner asks again about once a second while it waits).
constexpr int64_t waiter_keep_ms = 3000;
/// A gang whose round was refused asks again after this long (a node that refused it keeps
/// its reserved start meanwhile: lease_waiters).
constexpr int64_t retry_after_ms = 250;
/// How long a granted lease holds its slots without a commit.
constexpr int64_t lease_ttl_ms = 10'000;
/// A part whose owner has not polled it for this long is stopped.
constexpr int64_t orphan_after_ms = 15'000;
/// An ended part's outcome is kept this long for its owner's poll.
constexpr int64_t ended_keep_ms = 60'000;
/// Stops of parts of ended attempts are sent until answered, for this long.
constexpr int64_t stop_for_ms = 15'000;

std::string host_of(const std::string& address) {
  std::string host;
  uint16_t port = 0;
  if (!split_address(address, host, port))
    return "127.0.0.1";
  return host;
}

resources times(const resources& w, size_t n) {
  auto r = w;
  r.cpus *= static_cast<int32_t>(n);
  r.mem_mb *= static_cast<int64_t>(n);
  r.gpus *= static_cast<int32_t>(n);
  return r;
}

/// The room left on this node now: its total less its attempts, parts and leases.
resources free_here(const coordinator_state& st) {
  auto free = st.cfg.total;
  for (auto& r : placement_running(st)) {
    free.cpus -= r.use.cpus;
    free.mem_mb -= r.use.mem_mb;
    free.gpus -= r.use.gpus;
  }
  return free;
}

std::string node_name(const coordinator_state& st, const std::string& node) {
  return node_label(st.view.members(), node);
}

/// Asks `node` (this node itself: answered here, by `local`) and hands the decoded answer
/// or the failure to `then`.
template <class Reply, class Request, class Local>
void ask_part_node(coordinator_actor* self, const std::string& node, verb v, const Request& req,
                   Local local, std::function<void(expected<Reply>)> then) {
  auto& st = self->state;
  if (node == st.self_node()) {
    then(expected<Reply>{local(self, req)});
    return;
  }
  if (!st.membership) {
    then(expected<Reply>{failure{"no membership actor"}});
    return;
  }
  ask_node(self, st.membership, node, v, encode(req), peer_timeout::reserve)
    .then([=](const std::string& body) { then(decode<Reply>(body, to_string(v))); },
          [=](const caf::error& err) { then(expected<Reply>{failure{describe(err)}}); });
}

// ---- executor side ---------------------------------------------------------------------------

void expire_leases(coordinator_state& st, int64_t now) {
  for (auto it = st.leases.begin(); it != st.leases.end();)
    if (it->second.hold.expires_ms <= now)
      it = st.leases.erase(it);
    else
      ++it;
}

lease_reply grant_lease(coordinator_actor* self, const lease_request& req) {
  auto& st = self->state;
  auto refuse = [](std::string why) { return lease_reply{false, std::move(why), {}, 0}; };
  if (req.release) {
    st.leases.erase(req.lease);
    return refuse("released");
  }
  if (!st.accepting || st.leaving || !st.view.majority() || !st.synced)
    return refuse("this node accepts no work now");
  if (req.from != st.self_node() && !st.view.alive(req.from))
    return refuse("the gang's owner " + req.from + " is not alive in this node's view");
  auto id = job_id::parse(req.job);
  if (!id || req.workers < 1 || req.lease.empty())
    return refuse("malformed lease request");
  resources use;
  use.cpus = req.cpus;
  use.mem_mb = req.mem_mb;
  use.gpus = req.gpus;
  use.gpu_mem_mb = req.gpu_mem_mb;
  use.tags = req.tags;
  if (auto never = never_fits(st.cfg.total, use); !never.empty())
    return refuse(never);
  auto now = now_ms();
  expire_leases(st, now);
  lease_reply yes{true, {}, host_of(st.cfg.address), free_tcp_port("0.0.0.0")};
  if (st.leases.count(req.lease))
    return yes; // asked again (an answer was lost): still held
  std::vector<lease_hold> held;
  for (auto& [lid, l] : st.leases)
    held.push_back(l.hold);
  // The own queue in the same order as the gangs: priority, then submit time.
  auto queue = placement_queue(st, nullptr);
  by_submit_time(st, queue);
  // An own gang too big for this node counts by the share it would take here: counted whole,
  // it fits nowhere and a later gang of another owner took the slots it waits for.
  for (auto& q : queue)
    if (auto* rec = st.book.owned(q.id);
        rec && rec->spec.ranks() > 1 && !never_fits(st.cfg.total, q.need).empty())
      q.need = gang_share(st.cfg.total, per_worker(rec->spec), rec->spec.ranks());
  lease_ask ask;
  ask.order = gang_order{req.priority, req.submitted_ms, req.job};
  ask.use = use;
  ask.timeout_s = req.timeout_s;
  // Other owners' gangs refused here lately wait like this node's own queued jobs: an
  // earlier one holds its reserved start against this ask.
  for (auto it = st.lease_waiters.begin(); it != st.lease_waiters.end();)
    it = it->second.second < now ? st.lease_waiters.erase(it) : std::next(it);
  auto waiting = lease_waiting(st, &*id);
  queue.insert(queue.end(), waiting.begin(), waiting.end());
  auto d = judge_leases(st.cfg.total, placement_running(st, false), held, queue, {ask}, now);
  if (d.granted.empty())
    st.lease_waiters[*id] = {ask, now + waiter_keep_ms};
  else
    st.lease_waiters.erase(*id);
  if (d.granted.empty())
    return refuse("no room for " + std::to_string(req.workers) + " workers now ("
                  + std::to_string(st.leases.size()) + " leases held, "
                  + std::to_string(st.running.size() + st.parts.size())
                  + " attempts running; judged in the gang order with this node's queue)");
  for (auto& lid : d.revoked) {
    st.log->info("lease {} revoked for job {}, an earlier gang", lid, id->short_str());
    st.leases.erase(lid);
  }
  lease_info l;
  l.job = *id;
  l.hold.id = req.lease;
  l.hold.owner = req.from;
  l.hold.order = ask.order;
  l.hold.use = use;
  l.hold.expires_ms = now + std::clamp<int64_t>(req.ttl_ms, 1000, 60'000);
  st.leases[req.lease] = std::move(l);
  return yes;
}

lease_reply start_part(coordinator_actor* self, const gang_start_request& req) {
  auto& st = self->state;
  auto refuse = [](std::string why) { return lease_reply{false, std::move(why), {}, 0}; };
  auto now = now_ms();
  expire_leases(st, now);
  auto it = st.leases.find(req.lease);
  if (it == st.leases.end())
    return refuse("no lease " + req.lease + " here (it expired, or was revoked for an earlier "
                  "gang)");
  if (it->second.hold.owner != req.from || req.record.attempts.empty()
      || it->second.job != req.record.id || req.ranks.empty())
    return refuse("the start does not match lease " + req.lease);
  if (!st.accepting)
    return refuse("this node is shutting down");
  auto rec = req.record;
  auto at = rec.attempts.back();
  if (st.parts.count(at.id.str()))
    return lease_reply{true, {}, {}, 0};
  auto dir = job_log_dir(st, rec.id);
  at.log_out = dir + "/" + std::to_string(at.number) + ".out";
  at.log_err = dir + "/" + std::to_string(at.number) + ".err";
  part_run p;
  p.job = rec.id;
  p.number = at.number;
  p.attempt_id = at.id.str();
  p.owner = req.from;
  p.ranks = req.ranks;
  p.use = it->second.hold.use;
  st.leases.erase(it);
  for (int i = 0; i < p.use.gpus && !st.free_gpus.empty(); ++i) {
    p.gpus.push_back(*st.free_gpus.begin());
    st.free_gpus.erase(st.free_gpus.begin());
  }
  p.end_ms = run_bound_s(rec.spec) > 0 ? now + static_cast<int64_t>(run_bound_s(rec.spec) * 1000)
                                    : no_end;
  p.status.job = rec.id.str();
  p.status.attempt = p.attempt_id;
  p.status.state = "running";
  p.status.ranks = p.ranks;
  p.last_poll_ms = now;
  auto args = worker_args_for(st, rec, at);
  args.mem_limit_mb = rec.spec.mem_mb * static_cast<int64_t>(p.ranks.size());
  args.stdout_path = at.log_out;
  args.request = launch_for(rec, at, std::vector<int32_t>(p.gpus.begin(), p.gpus.end()),
                            st.cfg.node, st.cfg.cgroup_base);
  add_device_speed(args.request, st.cfg.devices, rec.spec,
                   std::vector<int32_t>(p.gpus.begin(), p.gpus.end()));
  args.request.mem_limit_mb = args.mem_limit_mb;
  // A gang command job's checkpoint directory is saved where rank 0 runs (rank 0 saves, as
  // torch DDP scripts do); every part restores it.
  args.ckpt.capture = args.ckpt.capture
                      && std::find(p.ranks.begin(), p.ranks.end(), 0) != p.ranks.end();
  if (rec.spec.app.empty()) {
    static const std::string runtime_exe = self_executable();
    gang_layout layout{p.ranks, req.group, req.master_addr, req.master_port};
    add_gang_runner(args.request, rec, at, runtime_exe, st.cfg.kill_grace.count(), &layout);
  } else {
    add_app_host(args.request, rec, at, app_host_for(st, rec, at, p.ranks));
    args.request.env.push_back("MONKEY_GANG_TOKEN=" + req.token);
  }
  rec.attempts.back() = at;
  p.rec = std::move(rec);
  auto worker = spawn_worker(self->system(), std::move(args), caf::actor_cast<caf::actor>(self),
                             st.journal, st.launch);
  self->link_to(worker);
  p.worker = worker;
  st.log->info("job {} attempt {}: running ranks {} here for owner {}", p.job.short_str(),
               p.number, rank_list_text(p.ranks), node_name(st, p.owner));
  st.parts[p.attempt_id] = std::move(p);
  return lease_reply{true, {}, {}, 0};
}

void stop_part_worker(coordinator_actor* self, part_run& p, const std::string& why) {
  if (!p.stop.empty() || p.status.state != "running")
    return;
  p.stop = why;
  if (p.worker)
    self->send(p.worker, atoms::stop::value,
              why == "requeued" || why == "stopped" ? why : std::string("cancelled"));
}

/// Kills part `p` at once and forgets it (its owner is gone, or this node was fenced).
void kill_part(coordinator_actor* self, const std::string& attempt, const std::string& why) {
  auto& st = self->state;
  auto it = st.parts.find(attempt);
  if (it == st.parts.end())
    return;
  auto& p = it->second;
  size_t killed = 0;
  if (!p.rec.attempts.empty()) {
    auto& at = p.rec.attempts.back();
    killed = static_cast<size_t>(signal_job(at.cgroup, at.pgid, SIGKILL));
    if (!at.cgroup.empty())
      st.launch->retire_cgroup(at.cgroup);
  }
  for (int g : p.gpus)
    st.free_gpus.insert(g);
  if (p.worker) {
    self->unlink_from(p.worker);
    caf::anon_send_exit(p.worker, caf::exit_reason::user_shutdown);
  }
  if (p.status.state == "running")
    st.log->warn("part of job {} attempt {} (ranks {}) stopped: {}; killed {} processes",
                 p.job.short_str(), p.number, rank_list_text(p.ranks), why, killed);
  st.parts.erase(it);
  request_schedule(self);
}

gang_poll_reply answer_poll(coordinator_actor* self, const gang_poll_request& req) {
  auto& st = self->state;
  gang_poll_reply out;
  auto now = now_ms();
  for (auto& o : req.parts) {
    auto it = st.parts.find(o.attempt);
    if (it == st.parts.end() || it->second.owner != req.from) {
      part_status s;
      s.job = o.job;
      s.attempt = o.attempt;
      s.state = "unknown";
      out.parts.push_back(std::move(s));
      continue;
    }
    auto& p = it->second;
    p.last_poll_ms = now;
    if (!o.peers.empty())
      p.peers = o.peers;
    p.kill_ranks.insert(p.kill_ranks.end(), o.kill_ranks.begin(), o.kill_ranks.end());
    if (o.stop)
      stop_part_worker(self, p, o.why.empty() ? "cancelled" : o.why);
    if (p.status.state == "ended")
      p.reported = true;
    out.parts.push_back(p.status);
  }
  return out;
}

// ---- owner side ----------------------------------------------------------------------------

void release_lease(coordinator_actor* self, const std::string& node, const job_id& id,
                   const std::string& lease) {
  lease_request r;
  r.from = self->state.self_node();
  r.job = id.str();
  r.lease = lease;
  r.release = true;
  ask_part_node<lease_reply>(self, node, verb::peer_lease, r, grant_lease,
                             [](expected<lease_reply>) {});
}

/// Tells the parts of an attempt that ended (or is being given up) to stop, until they
/// answer or `stop_for_ms` passed.
void stop_parts(coordinator_actor* self, const job_id& id, const std::string& attempt,
                const std::vector<gang_part>& parts, const std::string& why) {
  auto& st = self->state;
  for (auto& p : parts) {
    coordinator_state::part_stop s;
    s.node = p.node;
    s.order.job = id.str();
    s.order.attempt = attempt;
    s.order.stop = true;
    s.order.why = why;
    s.until_ms = now_ms() + stop_for_ms;
    st.part_stops.push_back(std::move(s));
  }
}

void commit_gang(coordinator_actor* self, const job_id& id, gang_round round);

void on_lease_answer(coordinator_actor* self, const job_id& id, const std::string& lease,
                     const std::string& node, expected<lease_reply> r) {
  auto& st = self->state;
  auto it = st.gang_rounds.find(id);
  if (it == st.gang_rounds.end() || it->second.lease != lease) {
    if (r && r->granted)
      release_lease(self, node, id, lease); // a round given up meanwhile
    return;
  }
  auto& round = it->second;
  round.replies[node] = r ? *r : lease_reply{false, r.error(), {}, 0};
  if (round.replies.size() < round.parts.size())
    return;
  auto round_copy = round;
  st.gang_rounds.erase(it);
  auto* rec = st.book.owned(id);
  std::string refused;
  for (auto& [n, rep] : round_copy.replies)
    if (!rep.granted) {
      st.gang_refused[id].insert(n);
      refused += (refused.empty() ? "" : "; ") + node_name(st, n) + ": " + rep.reason;
    }
  bool go = refused.empty() && rec && rec->state == job_state::queued && st.accepting
            && st.view.majority() && st.synced;
  if (!go) {
    for (auto& [n, rep] : round_copy.replies)
      if (rep.granted)
        release_lease(self, n, id, lease);
    if (!refused.empty())
      st.gang_why[id] = "waits for its gang of " + (rec ? workers_text(rec->spec) : std::string{"?"})
                        + " to be placed: the last placement round was refused ("
                        + refused + "); it tries again";
    st.gang_next_ms[id] = now_ms() + retry_after_ms;
    self->delayed_send(self, std::chrono::milliseconds(retry_after_ms + 5),
                       atoms::schedule::value);
    return;
  }
  commit_gang(self, id, std::move(round_copy));
}

void start_round(coordinator_actor* self, const job_record& rec, std::vector<gang_part> parts) {
  auto& st = self->state;
  auto id = rec.id;
  gang_round round;
  round.parts = parts;
  round.lease = st.self_node() + "-" + std::to_string(++st.lease_seq);
  auto lease = round.lease;
  st.gang_rounds[id] = std::move(round);
  auto per = per_worker(rec.spec);
  for (auto& p : parts) {
    lease_request req;
    req.from = st.self_node();
    req.job = id.str();
    req.lease = lease;
    req.priority = rec.spec.priority;
    req.submitted_ms = rec.submitted_ms;
    auto use = times(per, p.ranks.size());
    req.cpus = use.cpus;
    req.mem_mb = use.mem_mb;
    req.gpus = use.gpus;
    req.gpu_mem_mb = use.gpu_mem_mb;
    req.tags = use.tags;
    req.workers = static_cast<int32_t>(p.ranks.size());
    req.timeout_s = run_bound_s(rec.spec);
    req.ttl_ms = lease_ttl_ms;
    auto node = p.node;
    ask_part_node<lease_reply>(self, node, verb::peer_lease, req, grant_lease,
                               [=](expected<lease_reply> r) {
                                 on_lease_answer(self, id, lease, node, std::move(r));
                               });
  }
}

/// Ends the owned gang attempt of `id` as its parts did (on_done's path).
void end_gang(coordinator_actor* self, const job_id& id, attempt_result res) {
  auto& st = self->state;
  auto run = st.running.find(id);
  if (run == st.running.end() || !run->second.gang)
    return;
  auto g = run->second.gang;
  std::vector<gang_part> still;
  for (auto& p : g->parts)
    if (auto s = g->status.find(p.node); s == g->status.end() || s->second.state == "running")
      still.push_back(p);
  if (!still.empty())
    stop_parts(self, id, run->second.attempt_id, still,
               res.outcome == "requeued" ? "requeued" : "cancelled");
  on_done(self, id, run->second.attempt, res);
}

/// The owned gang attempt of `id` is lost (`cause`): requeued from --max-requeues.
void lose_gang(coordinator_actor* self, const job_id& id, const std::string& cause) {
  auto& st = self->state;
  auto run = st.running.find(id);
  auto* rec = st.book.owned(id);
  if (run == st.running.end() || !run->second.gang || !rec)
    return;
  stop_parts(self, id, run->second.attempt_id, run->second.gang->parts, "cancelled");
  auto before = *rec;
  mark_lost(*rec, cause, now_ms());
  st.log->warn("job {} attempt {}: {}", id.short_str(), run->second.attempt, cause);
  st.running.erase(run);
  attempt_ended(self, id, before);
}

void commit_gang(coordinator_actor* self, const job_id& id, gang_round round) {
  auto& st = self->state;
  auto* rec = st.book.owned(id);
  if (!rec)
    return;
  st.book.dequeue(id);
  auto dir = job_log_dir(st, id);
  auto now = now_ms();
  auto& at = begin_attempt(*rec, attempt_id{st.cfg.node, st.cfg.incarnation, ++*st.cfg.attempt_seq},
                           now, dir, {});
  at.hosts = hosts_of(round.parts);
  run_info run;
  run.attempt = at.number;
  run.attempt_id = at.id.str();
  run.end_ms = run_bound_s(rec->spec) > 0
                 ? now + static_cast<int64_t>(run_bound_s(rec->spec) * 1000)
                                       : no_end;
  run.gang = std::make_shared<gang_run>();
  run.gang->parts = round.parts;
  st.running[id] = run;
  st.gang_why.erase(id);
  st.gang_refused.erase(id);
  st.gang_next_ms.erase(id);
  std::string placed;
  for (auto& p : round.parts)
    placed += (placed.empty() ? "" : ", ") + std::string("ranks ") + rank_list_text(p.ranks)
              + " on " + node_name(st, p.node);
  st.log->info("job {} attempt {}: gang placed ({})", id.short_str(), at.number, placed);
  auto& rank0 = round.replies[round.parts.front().node];
  gang_start_request req;
  req.from = st.self_node();
  req.lease = round.lease;
  req.record = *rec;
  req.master_addr = rank0.host.empty() ? std::string("127.0.0.1") : rank0.host;
  req.master_port = rank0.free_port;
  req.token = make_nonce();
  auto number = at.number;
  for (size_t g = 0; g < round.parts.size(); ++g) {
    auto part = round.parts[g];
    req.ranks = part.ranks;
    req.group = static_cast<int32_t>(g);
    ask_part_node<lease_reply>(
      self, part.node, verb::peer_gang_start, req, start_part,
      [=](expected<lease_reply> r) {
        auto& st = self->state;
        auto run = st.running.find(id);
        if (run == st.running.end() || run->second.attempt != number || !run->second.gang)
          return;
        if (r && r->granted) {
          run->second.gang->status[part.node].state = "running";
          return;
        }
        auto why = r ? r->reason : r.error();
        st.log->warn("job {} attempt {}: the start of ranks {} on {} failed: {}",
                     id.short_str(), number, rank_list_text(part.ranks),
                     node_name(st, part.node), why);
        end_gang(self, id,
                 attempt_result{"requeued",
                                "the gang's start failed on " + node_name(st, part.node) + " ("
                                  + why + ")",
                                {}});
      });
  }
  persist(self, {*rec});
}

/// Outcomes wait while this node was just paused or cannot see a majority (as `hold` does
/// for a worker's): the others may have adopted the job meanwhile, and fencing decides.
bool outcomes_held(const coordinator_state& st) {
  return now_ms() < st.hold_until || !(st.view.majority() || !st.accepting);
}

/// Looks at the parts' last answers: ends the attempt, or hands out the peers.
void judge_gang(coordinator_actor* self, const job_id& id) {
  auto& st = self->state;
  if (outcomes_held(st))
    return;
  auto run = st.running.find(id);
  if (run == st.running.end() || !run->second.gang)
    return;
  auto& g = *run->second.gang;
  exit_info total;
  size_t ok = 0;
  for (auto& p : g.parts) {
    auto s = g.status.find(p.node);
    if (s == g.status.end())
      continue;
    auto where = "ranks " + rank_list_text(p.ranks) + " on " + node_name(st, p.node);
    if (s->second.state == "unknown")
      return lose_gang(self, id, where + " no longer run (its runtime restarted or dropped the "
                                         "part)");
    if (s->second.state != "ended")
      continue;
    if (s->second.outcome == "failed" && s->second.exit_code == gang_restart_exit
        && !run->second.gang->parts.empty()) {
      auto* rec = st.book.owned(id);
      if (rec && !rec->spec.app.empty())
        return lose_gang(self, id, where + ": a rank failed, and the app's gang policy starts "
                                           "the whole gang again from its newest checkpoint");
    }
    if (s->second.outcome != "succeeded") {
      exit_info e;
      e.exit_code = s->second.exit_code;
      e.term_signal = s->second.term_signal;
      e.max_rss_kb = s->second.max_rss_kb;
      e.cpu_s = s->second.cpu_s;
      return end_gang(self, id, attempt_result{s->second.outcome, where + ": " + s->second.cause, e});
    }
    ++ok;
    total.exit_code = 0;
    total.max_rss_kb = std::max(total.max_rss_kb, s->second.max_rss_kb);
    total.cpu_s += s->second.cpu_s;
  }
  if (ok == g.parts.size())
    return end_gang(self, id,
                    attempt_result{"succeeded",
                                   "exit 0 on every node (" + std::to_string(g.parts.size())
                                     + " parts)",
                                   total});
  // An app gang: every host is ready; hand each the others' endpoints.
  if (g.peers.empty()) {
    std::vector<std::string> peers;
    for (auto& p : g.parts) {
      auto s = g.status.find(p.node);
      if (s == g.status.end() || s->second.endpoint.empty())
        return;
      peers.push_back(s->second.endpoint);
    }
    g.peers = std::move(peers);
  }
}

void poll_gang(coordinator_actor* self, const job_id& id) {
  auto& st = self->state;
  auto run = st.running.find(id);
  if (run == st.running.end() || !run->second.gang || run->second.gang->polling)
    return;
  auto g = run->second.gang;
  std::vector<std::string> nodes;
  for (auto& p : g->parts)
    if (auto s = g->status.find(p.node); s != g->status.end() && s->second.state == "running")
      nodes.push_back(p.node); // started (acknowledged) and not known to have ended
  if (nodes.empty()) {
    // Nothing left to ask, but the last answers may not have been judged: every part had
    // ended while this node could not see a majority (outcomes held), and no later answer
    // comes to judge them. Judge them now, or the attempt runs for ever (a chaos seed found
    // it: a gang whose parts ended while its new owner was cut off).
    judge_gang(self, id);
    return;
  }
  g->polling = true;
  auto pending = std::make_shared<size_t>(nodes.size());
  auto attempt = run->second.attempt_id;
  auto number = run->second.attempt;
  for (auto& node : nodes) {
    gang_poll_request req;
    req.from = st.self_node();
    part_order o;
    o.job = id.str();
    o.attempt = attempt;
    o.stop = !g->stop.empty();
    o.why = g->stop;
    o.peers = g->peers;
    o.kill_ranks.swap(g->kill_ranks[node]);
    req.parts.push_back(std::move(o));
    ask_part_node<gang_poll_reply>(
      self, node, verb::peer_gang_poll, req, answer_poll,
      [=](expected<gang_poll_reply> r) {
        auto& st = self->state;
        auto run = st.running.find(id);
        if (run == st.running.end() || run->second.attempt != number || run->second.gang != g)
          return;
        if (r)
          for (auto& s : r->parts)
            if (s.attempt == attempt) {
              g->status[node] = s;
              g->unanswered[node] = 0;
            }
        if (!r)
          g->unanswered[node] += 1;
        if (--*pending == 0) {
          g->polling = false;
          judge_gang(self, id);
        }
      });
  }
}

} // namespace

bool is_gang(const job_spec& spec) {
  return spec.ranks() > 1 || !spec.app.empty();
}

void place_gangs(coordinator_actor* self, const std::vector<queued_job>& queue,
                 const placement_plan& plan) {
  auto& st = self->state;
  if (!st.accepting || st.leaving || !st.view.majority() || !st.synced)
    return;
  auto now = now_ms();
  // In the gang order, so that the asks of an earlier gang reach every node first.
  std::vector<std::pair<gang_order, const queued_job*>> order;
  for (auto& q : queue)
    if (auto* rec = st.book.owned(q.id); rec && is_gang(rec->spec))
      order.push_back({gang_order{rec->spec.priority, rec->submitted_ms, q.id.str()}, &q});
  std::sort(order.begin(), order.end(),
            [](const auto& a, const auto& b) { return goes_before(a.first, b.first); });
  // Nodes an earlier gang waits for: a later gang of this owner does not take them (its
  // reservation, as in EASY; without runtime estimates across nodes, no backfill there).
  std::set<std::string> reserved;
  int64_t wake = 0; // the earliest place_after_ms that ends
  auto wake_then = [&] {
    if (wake == 0 || (st.gang_wake_ms > now && st.gang_wake_ms <= wake))
      return;
    st.gang_wake_ms = wake;
    self->delayed_send(self, std::chrono::milliseconds(std::max<int64_t>(wake - now, 0) + 5),
                       atoms::schedule::value);
  };
  for (auto& [o, qp] : order) {
    auto& q = *qp;
    if (!q.blocked.empty() && !st.gang_rounds.count(q.id))
      continue; // not eligible now (dependencies, backoff, draining): reserves nothing
    // (A gang with dependencies is placed once they are met: q.blocked says so until then;
    // its owner stays its owner, so nothing moves across owners.)
    auto* rec = st.book.owned(q.id);
    if (!rec || std::find(plan.start.begin(), plan.start.end(), q.id) != plan.start.end())
      continue;
    if (auto r = st.gang_rounds.find(q.id); r != st.gang_rounds.end()) {
      for (auto& p : r->second.parts)
        reserved.insert(p.node);
      continue;
    }
    auto per = per_worker(rec->spec);
    auto& spec = rec->spec;
    auto what = workers_text(spec)
                + (spec.app.empty() ? std::string{}
                                    : " of app '" + spec.app + "' (build " + spec.app_build + ")")
                + " of " + std::to_string(spec.cpus) + " cpus"
                + (spec.gpus > 0 ? ", " + std::to_string(spec.gpus) + " gpus" : std::string{});
    auto& refused = st.gang_refused[q.id];
    auto candidates = [&](bool now_room, bool skip_refused, bool skip_reserved = true) {
      std::vector<node_room> nodes;
      auto skip = [&](const std::string& n) {
        return (skip_reserved && reserved.count(n)) || (skip_refused && refused.count(n));
      };
      if (!skip(st.self_node())) {
        node_room me;
        me.node = st.self_node();
        me.self = true;
        me.total = st.cfg.total;
        me.free = now_room ? free_here(st) : st.cfg.total;
        me.free.tags = me.total.tags;
        me.speed = per.gpus > 0 && st.cfg.total.gpus > 0 ? 1 : 0;
        nodes.push_back(me);
      }
      for (auto& m : st.view.members()) {
        if (m.node == st.self_node() || m.state != member_state::alive || skip(m.node))
          continue;
        node_room n;
        n.node = m.node;
        n.total.cpus = m.cpus;
        n.total.gpus = m.gpus;
        n.total.mem_mb = per.mem_mb > 0 ? st.cfg.total.mem_mb : 0; // not gossiped
        n.total.gpu_mem_mb = per.gpu_mem_mb;
        n.total.tags = m.tags;
        n.free = n.total;
        n.speed = per.gpus > 0 && m.gpus > 0 ? 1 : 0;
        nodes.push_back(std::move(n));
      }
      return nodes;
    };
    // What it waits for, when it does not start a round now.
    auto reserve = [&] {
      auto whole = plan_gang(per, rec->spec.ranks(), candidates(false, false));
      for (auto& p : whole.parts)
        reserved.insert(p.node);
    };
    bool fits_here = never_fits(st.cfg.total, q.need).empty();
    if (fits_here && now - rec->updated_ms < place_after_ms) {
      // The local plan may start it in a moment; else the pass then places it elsewhere.
      auto due = rec->updated_ms + place_after_ms;
      wake = wake == 0 ? due : std::min(wake, due);
      continue;
    }
    if (st.gang_rounds.size() >= rounds_in_flight) {
      reserve();
      continue;
    }
    if (auto it = st.gang_next_ms.find(q.id); it != st.gang_next_ms.end() && it->second > now) {
      reserve();
      continue;
    }
    auto gp = plan_gang(per, rec->spec.ranks(), candidates(true, true), what);
    if (gp.parts.empty() && !refused.empty()) {
      refused.clear(); // every candidate refused lately: ask them all again
      gp = plan_gang(per, rec->spec.ranks(), candidates(true, false), what);
    }
    if (gp.parts.empty()) {
      auto mine = plan_gang(per, rec->spec.ranks(), candidates(false, false), what);
      auto whole = plan_gang(per, rec->spec.ranks(), candidates(false, false, false), what);
      st.gang_why[q.id] = whole.parts.empty() ? whole.why
                          : mine.parts.empty()
                            ? "waits behind earlier gangs of its owner (the gang order: "
                              "priority, then submit time): the nodes it needs are reserved "
                              "for them"
                            : gp.why;
      for (auto& p : mine.parts)
        reserved.insert(p.node);
      continue;
    }
    for (auto& p : gp.parts)
      reserved.insert(p.node);
    if (gp.parts.size() == 1 && gp.parts[0].node == st.self_node())
      continue; // all on this node: the local plan (with its reservation) starts it
    start_round(self, *rec, std::move(gp.parts));
  }
  wake_then();
}

void gang_tick(coordinator_actor* self) {
  auto& st = self->state;
  auto now = now_ms();
  std::vector<job_id> gangs;
  for (auto& [id, run] : st.running)
    if (run.gang)
      gangs.push_back(id);
  for (auto& id : gangs)
    poll_gang(self, id);
  // Stops of parts of ended attempts, until their node answers.
  auto stops = std::move(st.part_stops);
  st.part_stops.clear();
  for (auto& s : stops) {
    if (s.until_ms < now || (s.node != st.self_node() && !st.view.alive(s.node)))
      continue;
    gang_poll_request req;
    req.from = st.self_node();
    req.parts.push_back(s.order);
    auto keep = s;
    ask_part_node<gang_poll_reply>(self, s.node, verb::peer_gang_poll, req, answer_poll,
                                   [=](expected<gang_poll_reply> r) {
                                     bool done = r && !r->parts.empty()
                                                 && r->parts.front().state != "running";
                                     if (!done)
                                       self->state.part_stops.push_back(keep);
                                   });
  }
  if (st.ticks % 5 != 0)
    return;
  expire_leases(st, now);
  std::vector<std::pair<std::string, std::string>> drop;
  for (auto& [attempt, p] : st.parts) {
    if (p.status.state == "ended") {
      if (p.reported || now - p.last_poll_ms > ended_keep_ms)
        drop.push_back({attempt, "ended"});
    } else if (now - p.last_poll_ms > orphan_after_ms) {
      drop.push_back({attempt, "its owner " + node_name(st, p.owner) + " stopped asking for it"});
    }
  }
  for (auto& [attempt, why] : drop)
    kill_part(self, attempt, why);
  if (!drop.empty())
    check_drained(self); // `monkey drain` waits for the parts run here
}

void on_lease(coordinator_actor* self, caf::response_promise rp, const lease_request& req) {
  rp.deliver(reply(grant_lease(self, req)));
}

void on_gang_start(coordinator_actor* self, caf::response_promise rp, gang_start_request req) {
  rp.deliver(reply(start_part(self, req)));
}

void on_gang_poll(coordinator_actor* self, caf::response_promise rp,
                  const gang_poll_request& req) {
  if (req.parts.size() > 4096)
    return rp.deliver(make_error(errc::bad_request, "peer gang poll: more than 4096 parts"));
  rp.deliver(reply(answer_poll(self, req)));
}

part_run* find_part(coordinator_state& st, const job_id& id, int32_t number) {
  for (auto& [a, p] : st.parts)
    if (p.job == id && p.number == number)
      return &p;
  return nullptr;
}

part_run* part_by_attempt(coordinator_state& st, const std::string& attempt) {
  auto it = st.parts.find(attempt);
  return it == st.parts.end() ? nullptr : &it->second;
}

void on_part_started(coordinator_actor* self, part_run& p, const launch_result& res) {
  p.status.pid = res.pid;
  if (!p.rec.attempts.empty()) {
    auto& at = p.rec.attempts.back();
    at.pid = res.pid;
    at.pgid = res.pgid;
    at.start_ticks = res.start_ticks;
    at.cgroup = res.cgroup_dir;
  }
  // The owner's own part: the attempt's record says where the gang resumed (every part
  // restores the same step, the newest that every rank saved).
  if (res.resumed_step < 0)
    return;
  auto* rec = self->state.book.owned(p.job);
  if (!rec || rec->attempts.empty() || rec->attempts.back().number != p.number
      || rec->attempts.back().resumed_step >= 0)
    return;
  auto& at = rec->attempts.back();
  at.resumed_step = res.resumed_step;
  at.resumed_from = res.resumed_from;
  rec->version += 1;
  rec->updated_ms = now_ms();
  persist(self, {*rec});
}

void on_part_done(coordinator_actor* self, part_run& p, const attempt_result& res) {
  auto& st = self->state;
  if (p.status.state != "running")
    return;
  for (int g : p.gpus)
    st.free_gpus.insert(g);
  p.gpus.clear();
  if (p.worker)
    self->unlink_from(p.worker);
  p.worker = nullptr;
  p.status.state = "ended";
  p.status.outcome = res.outcome;
  p.status.cause = res.cause;
  p.status.exit_code = res.exit.exit_code;
  p.status.term_signal = res.exit.term_signal;
  p.status.max_rss_kb = res.exit.max_rss_kb;
  p.status.cpu_s = res.exit.cpu_s;
  p.last_poll_ms = now_ms();
  st.log->info("part of job {} attempt {} (ranks {}) ended: {}", p.job.short_str(), p.number,
               rank_list_text(p.ranks), res.cause);
  request_schedule(self);
  maybe_finish_shutdown(self);
}

void stop_gang(coordinator_actor* self, const job_id& id, const std::string& why) {
  auto& st = self->state;
  auto run = st.running.find(id);
  if (run == st.running.end() || !run->second.gang || !run->second.gang->stop.empty())
    return;
  run->second.gang->stop = why;
}

void gangs_on_members(coordinator_actor* self) {
  auto& st = self->state;
  auto gone = [&](const std::string& node) {
    if (node == st.self_node())
      return false;
    auto s = st.view.state_of(node);
    return s == member_state::dead || s == member_state::left;
  };
  std::vector<std::pair<job_id, std::string>> lost;
  for (auto& [id, run] : st.running) {
    if (!run.gang || outcomes_held(st))
      continue;
    for (auto& p : run.gang->parts)
      if (gone(p.node)) {
        lost.push_back({id, "node " + node_name(st, p.node) + " hosting ranks "
                              + rank_list_text(p.ranks) + " is "
                              + to_string(st.view.state_of(p.node))});
        break;
      }
  }
  for (auto& [id, why] : lost)
    lose_gang(self, id, why);
  std::vector<std::string> orphans;
  for (auto& [attempt, p] : st.parts)
    if (gone(p.owner))
      orphans.push_back(attempt);
  for (auto& a : orphans)
    kill_part(self, a, "the gang's owner died or left (it or an adopter starts the gang anew)");
  // Leases of owners that are gone are released.
  for (auto it = st.leases.begin(); it != st.leases.end();)
    if (gone(it->second.hold.owner))
      it = st.leases.erase(it);
    else
      ++it;
}

size_t void_parts(coordinator_actor* self, const std::string& why) {
  auto& st = self->state;
  std::vector<std::string> all;
  for (auto& [a, p] : st.parts)
    all.push_back(a);
  for (auto& a : all)
    kill_part(self, a, why);
  st.leases.clear();
  st.gang_rounds.clear();
  return all.size();
}

void stop_gang_parts(coordinator_actor* self, const job_id& id, const run_info& run,
                     const std::string& why) {
  if (run.gang)
    stop_parts(self, id, run.attempt_id, run.gang->parts, why);
}

bool spans_nodes(const attempt_record& at, const std::string& self) {
  for (auto& h : at.hosts)
    if (h.rfind(self + ":", 0) != 0)
      return true;
  return false;
}

std::vector<queued_job> lease_waiting(const coordinator_state& st, const job_id* except) {
  std::vector<queued_job> out;
  auto now = now_ms();
  uint64_t fake = 0;
  for (auto& [id, w] : st.lease_waiters) {
    if (w.second < now || (except && id == *except))
      continue;
    queued_job q;
    q.id = job_id{std::numeric_limits<uint64_t>::max() - 3, ++fake};
    q.label = "gang " + id.short_str() + " of another owner";
    q.priority = w.first.order.priority;
    q.submit_seq = static_cast<uint64_t>(std::max<int64_t>(0, w.first.order.submitted_ms));
    q.need = w.first.use;
    q.timeout_s = w.first.timeout_s;
    out.push_back(std::move(q));
  }
  return out;
}

std::string gang_wait(const coordinator_state& st, const job_id& id) {
  if (st.gang_rounds.count(id))
    return "its gang is being placed: leases asked of the nodes of its parts";
  auto it = st.gang_why.find(id);
  return it == st.gang_why.end() ? std::string{} : it->second;
}

} // namespace monkey
