// SPDX-License-Identifier: Apache-2.0
#include "actors/coordinator.hpp"

#include <algorithm>
#include <dirent.h>
#include <optional>
#include <fcntl.h>
#include <set>
#include <sys/stat.h>
#include <csignal>
#include <unistd.h>
#include <unordered_map>

#include <caf/all.hpp>

#include "runtime/atoms.hpp"
#include "actors/messages.hpp"
#include "actors/membership.hpp"
#include "actors/worker.hpp"
#include "runtime/envelope.hpp"
#include "runtime/errc.hpp"
#include "runtime/logging.hpp"
#include "runtime/messages/client.hpp"
#include "runtime/ownership.hpp"
#include "runtime/proc.hpp"
#include "runtime/supervisor.hpp"

extern char** environ;

namespace monkey {

namespace {

struct run_info {
  int32_t attempt = 0;
  caf::actor worker;
  uint32_t restarts = 0; ///< worker restarts (re-adoptions) of this attempt
  resources use;
  std::vector<int> gpus;
  int64_t end_ms = no_end;
  std::string stop_pending; ///< a stop asked for before the worker existed
};

/// A device proxy as the coordinator sees it: the chunks it holds.
struct proxy_ref {
  std::string name;
  caf::actor handle;
  int32_t slots = 1;
  std::set<uint64_t> chunks;
};

struct task_waiter {
  uint64_t seq = 0;
  caf::response_promise rp;
};

struct coordinator_state {
  coordinator_config cfg;
  caf::actor journal;
  caf::actor devices;
  std::vector<proxy_ref> proxies;
  task_book tasks;
  std::vector<task_range> task_final;   ///< reported, waiting for the next grouped write
  bool task_flush_queued = false;
  bool task_flush_in_flight = false;
  uint64_t task_waiter_seq = 0;
  std::unordered_map<job_id, std::vector<task_waiter>> task_waiters;
  std::unordered_map<std::string, std::vector<caf::response_promise>> task_key_in_flight;
  // cluster (docs/cluster.md)
  caf::actor membership;
  std::vector<member> members;          ///< the membership's table, as last told
  bool have_members = false;
  bool majority = true; ///< this node sees a majority of the agreed member list
  std::set<job_id> adopting; ///< adoptions waiting for the other members' copies
  /// Jobs of other owners seen in cluster-wide listings: when every holder of one is
  /// down, `jobs` still lists it, as unavailable (bounded by max_seen, oldest dropped).
  std::map<job_id, job_summary> seen;
  // Anti-entropy: per peer, the id after which the next digest page starts.
  std::map<std::string, std::string> ae_cursor;
  std::set<std::string> ae_in_flight; ///< one page in flight per peer
  size_t ae_next = 0;
  uint64_t ae_ticks = 0, ae_taken = 0, ae_sent = 0;
  // Placement across nodes: queued jobs offered to another node, until when (ms); the
  // nodes that refused a job in the current round.
  std::map<job_id, int64_t> offered;
  size_t forwards_in_flight = 0;
  struct reservation_request {
    caf::response_promise rp;
    job_record rec;
  };
  std::vector<reservation_request> reservations; ///< gathered for the next round
  std::map<job_id, std::set<std::string>> refused_by;
  std::unordered_map<job_id, job_record> held; ///< records held as a replica (owner elsewhere)
  std::unordered_map<job_id, job_record> unsynced; ///< own records waiting for the holders' word
  bool synced = false;
  int64_t last_tick_ms = 0;
  int64_t hold_until = 0;            ///< after a pause: attempt outcomes wait (fencing)
  std::vector<caf::message> on_hold; ///< started/done messages kept meanwhile
  std::shared_ptr<launcher> launch;
  std::shared_ptr<spdlog::logger> log;
  std::unordered_map<job_id, job_record> jobs;
  std::set<std::pair<uint64_t, job_id>> queued; ///< (submit_seq, id)
  std::unordered_map<job_id, run_info> running;
  std::unordered_map<std::string, std::vector<job_id>> by_key;
  std::unordered_map<std::string, std::vector<caf::response_promise>> key_in_flight;
  std::set<int> free_gpus;
  uint64_t next_seq = 0;
  uint64_t attempt_seq = 0;
  bool schedule_queued = false;
  bool accepting = true;
  bool draining = false;
  bool leaving = false;     ///< `monkey drain`: hands its jobs over, then leaves
  bool leave_signalled = false;
  std::vector<caf::response_promise> shutdown_waiters;
  static inline const char* name = "coordinator";
};

using coordinator_actor = caf::stateful_actor<coordinator_state>;

template <class T>
std::string reply(const T& value) {
  return encode(value);
}

/// Answers the submits that waited for the first one with the same client key.
template <class Answer>
void settle_key(std::unordered_map<std::string, std::vector<caf::response_promise>>& waiting,
                const std::string& key, const Answer& answer) {
  if (key.empty())
    return;
  if (auto it = waiting.find(key); it != waiting.end()) {
    for (auto& w : it->second)
      w.deliver(answer);
    waiting.erase(it);
  }
}

void request_schedule(coordinator_actor* self) {
  if (!self->state.schedule_queued) {
    self->state.schedule_queued = true;
    self->send(self, atoms::schedule::value);
  }
}

std::string self_node(const coordinator_state& st) {
  return st.cfg.node.str();
}

const member* find_member(const coordinator_state& st, const std::string& node) {
  for (auto& m : st.members)
    if (m.node == node)
      return &m;
  return nullptr;
}

/// Alive as far as this node knows (itself always; others once the membership said so).
bool is_alive(const coordinator_state& st, const std::string& node) {
  if (node == self_node(st))
    return true;
  auto* m = find_member(st, node);
  return m && m->state == member_state::alive;
}

std::vector<std::string> alive_nodes(const coordinator_state& st) {
  std::vector<std::string> out{self_node(st)};
  for (auto& m : st.members)
    if (m.node != self_node(st) && m.state == member_state::alive)
      out.push_back(m.node);
  return out;
}

std::string minority_text(const coordinator_state& st) {
  size_t alive = 0;
  for (auto& m : st.members)
    alive += m.state == member_state::alive ? 1 : 0;
  return "this node cannot see a majority of the cluster (" + std::to_string(alive) + " of "
         + std::to_string(st.members.size())
         + " members alive in its view): a partition or many failures";
}

/// A request to another node's gateway, through the membership's authenticated link.
auto
ask_node(coordinator_actor* self, const std::string& node, verb v, std::string body,
         std::chrono::milliseconds timeout) {
  return self->request(self->state.membership, timeout + std::chrono::seconds(1),
                       atoms::forward::value, node,
                       envelope{static_cast<uint16_t>(v), std::move(body)},
                       static_cast<uint32_t>(timeout.count()));
}

/// Sends `recs` to their other holders that are alive; `done(copies_min)` gets the fewest
/// durable copies any of the records now has (this node's included).
void replicate(coordinator_actor* self, const record_list& recs,
               std::function<void(size_t, const record_list&)> done) {
  auto& st = self->state;
  std::map<std::string, record_list> by_node;
  for (auto& r : recs)
    for (auto& n : r.replicas)
      if (n != self_node(st) && is_alive(st, n) && st.membership)
        by_node[n].push_back(r);
  if (by_node.empty())
    return done(1, {});
  auto acks = std::make_shared<std::map<job_id, size_t>>();
  auto newer = std::make_shared<record_list>();
  for (auto& r : recs)
    (*acks)[r.id] = 1;
  auto pending = std::make_shared<size_t>(by_node.size());
  auto finish = [=]() {
    if (--*pending > 0)
      return;
    size_t fewest = SIZE_MAX;
    for (auto& [id, n] : *acks)
      fewest = std::min(fewest, n);
    done(fewest, *newer);
  };
  for (auto& [node, list] : by_node) {
    replicate_request req;
    req.from = self_node(st);
    req.records = list;
    auto ids = std::make_shared<std::vector<job_id>>();
    for (auto& r : list)
      ids->push_back(r.id);
    auto target = node;
    ask_node(self, node, verb::peer_replicate, encode(req), std::chrono::seconds(5))
      .then(
        [=](const std::string& body) {
          for (auto& id : *ids)
            (*acks)[id] += 1;
          if (auto r = decode<replicate_reply>(body, "replicate"))
            for (auto& rec : r->newer)
              newer->push_back(rec);
          finish();
        },
        [=](const caf::error& err) {
          self->state.log->warn("replicating {} records to {} failed: {}", ids->size(), target,
                                describe(err));
          finish();
        });
  }
}

/// A holder has a newer copy of a job this node owned: it was adopted (a later ownership
/// term) while this node could not reach the others. This node keeps it as a replica.
void superseded(coordinator_actor* self, const job_record& newer, const char* when) {
  auto& st = self->state;
  st.log->warn("job {} was adopted by {} (version {}) while this node {}: holding it as a "
               "replica, the adopter's history stands",
               newer.id.short_str(), newer.owner.str(), newer.version, when);
  if (auto it = st.jobs.find(newer.id); it != st.jobs.end()) {
    st.queued.erase({it->second.submit_seq, newer.id});
    st.jobs.erase(it);
  }
  st.held[newer.id] = newer;
  write_batch batch;
  batch.records.push_back(newer);
  self->request(st.journal, caf::infinite, atoms::write::value, std::move(batch))
    .then([](bool) {}, [](const caf::error&) {});
}

/// A final state goes to the other holders first and into this node's journal after: if
/// this node freezes in between, the holders already know the job ended and adopt nothing;
/// if it freezes before, no journal holds that outcome and the adopter's is the only one.
template <class Then>
void persist_final(coordinator_actor* self, job_record rec, Then then) {
  replicate(self, {rec}, [=](size_t, const record_list& newer) mutable {
    for (auto& n : newer)
      if (n.id == rec.id && n.version > rec.version) {
        // Adopted by another owner while this node could not see the others: that
        // owner's history stands, and this attempt's outcome is void.
        superseded(self, n, "was cut off (its attempt here is void)");
        then();
        return;
      }
    write_batch batch;
    batch.records.push_back(rec);
    self->request(self->state.journal, caf::infinite, atoms::write::value, std::move(batch))
      .then([=](bool) mutable { then(); },
            [=](const caf::error& err) {
              self->state.log->error("journal write failed: {}", describe(err));
            });
  });
}

/// Makes `recs` durable here and on their other alive holders, then runs `then` (or
/// `on_error` when the local write failed).
template <class Then>
void persist(coordinator_actor* self, record_list recs, Then then,
             std::function<void(const caf::error&)> on_error = nullptr) {
  write_batch batch;
  batch.records = recs;
  self->request(self->state.journal, caf::infinite, atoms::write::value, std::move(batch))
    .then([=](bool) mutable {
            replicate(self, recs, [=](size_t, const record_list&) mutable { then(); });
          },
          [=](const caf::error& err) {
            self->state.log->error("journal write failed: {}", describe(err));
            if (on_error)
              on_error(err);
          });
}

/// Versions are (ownership term << 20) + transition count: adoption starts a term.
uint64_t next_term(uint64_t version) {
  return ((version >> 20) + 1) << 20;
}

void touch(job_record& rec, job_state state, std::string reason) {
  rec.state = state;
  rec.reason = std::move(reason);
  rec.version += 1;
  rec.updated_ms = now_ms();
}

/// Finds a job by full id or by a unique suffix of at least 6 characters.
expected<job_id> resolve(coordinator_state& st, const std::string& text) {
  if (auto id = job_id::parse(text)) {
    if (st.jobs.count(*id))
      return *id;
    return failure{"no job " + text + " on this node"};
  }
  if (text.size() < 6)
    return failure{"'" + text + "' is too short to name a job: give at least 6 characters"};
  std::string upper;
  for (char c : text)
    upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::vector<job_id> hits;
  for (auto& [id, rec] : st.jobs) {
    auto s = id.str();
    if (s.size() >= upper.size() && s.compare(s.size() - upper.size(), upper.size(), upper) == 0)
      hits.push_back(id);
  }
  if (hits.empty())
    return failure{"no job " + text + " on this node"};
  if (hits.size() > 1)
    return failure{"'" + text + "' is ambiguous: " + std::to_string(hits.size())
                   + " jobs end with it"};
  return hits.front();
}

resources need_of(const job_spec& s) {
  resources r;
  r.cpus = s.cpus;
  r.mem_mb = s.mem_mb;
  r.gpus = s.gpus;
  r.gpu_mem_mb = s.gpu_mem_mb;
  r.tags = s.tags;
  return r;
}

std::string path_join(const std::string& a, const std::string& b) {
  return a + "/" + b;
}

launch_request build_launch(const coordinator_config& cfg, const job_record& rec,
                            const attempt_record& at, const std::vector<int>& gpus) {
  launch_request req;
  auto argv = substitute_params(rec.spec);
  req.argv = argv ? *argv : rec.spec.command;
  // The runtime's own environment (less MONKEY_*), read once: it does not change.
  static const std::map<std::string, std::string> base_env = [] {
    std::map<std::string, std::string> out;
    for (char** e = environ; e && *e; ++e) {
      std::string kv = *e;
      auto eq = kv.find('=');
      if (eq != std::string::npos && kv.rfind("MONKEY_", 0) != 0)
        out[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    return out;
  }();
  auto env = base_env;
  for (auto& [k, v] : rec.spec.env)
    env[k] = v;
  env["MONKEY_JOB_ID"] = rec.id.str();
  env["MONKEY_ATTEMPT"] = std::to_string(at.number);
  env["MONKEY_ATTEMPT_ID"] = at.id.str();
  env["MONKEY_SEED"] = std::to_string(rec.spec.seed);
  for (auto& [k, v] : rec.spec.params)
    env[param_env_name(k)] = v;
  if (rec.spec.array_index >= 0)
    env["MONKEY_ARRAY_INDEX"] = std::to_string(rec.spec.array_index);
  std::string visible;
  for (int g : gpus)
    visible += (visible.empty() ? "" : ",") + std::to_string(g);
  env["CUDA_VISIBLE_DEVICES"] = visible;
  env["OMP_NUM_THREADS"] = std::to_string(rec.spec.cpus);
  env["OPENBLAS_NUM_THREADS"] = std::to_string(rec.spec.cpus);
  for (auto& [k, v] : env)
    req.env.push_back(k + "=" + v);
  req.workdir = rec.spec.workdir;
  req.stdout_path = at.log_out;
  req.stderr_path = at.log_err;
  if (!cfg.cgroup_base.empty())
    req.cgroup_dir = cfg.cgroup_base + "/monkey-" + cfg.node.str() + "/" + rec.id.short_str()
                     + "-" + std::to_string(at.number);
  return req;
}

worker_args worker_args_for(coordinator_state& st, const job_record& rec,
                            const attempt_record& at) {
  worker_args w;
  w.job = rec.id;
  w.attempt = at.number;
  w.timeout_s = rec.spec.timeout_s;
  w.started_ms = at.started_ms;
  w.stdout_path = at.log_out;
  w.mem_limit_mb = rec.spec.mem_mb;
  w.kill_grace = st.cfg.kill_grace;
  return w;
}

void spawn_worker_for(coordinator_actor* self, const job_id& id, worker_args args) {
  auto& st = self->state;
  auto worker = spawn_worker(self->system(), std::move(args), caf::actor_cast<caf::actor>(self),
                             st.journal, st.launch);
  // Linked: a worker dies with its coordinator (the child process lives on and is
  // re-adopted); a worker's own crash reaches the exit handler below.
  self->link_to(worker);
  auto& run = st.running[id];
  run.worker = worker;
  if (!run.stop_pending.empty())
    self->send(worker, atoms::stop::value, run.stop_pending);
}

void start_attempt(coordinator_actor* self, const job_id& id) {
  auto& st = self->state;
  auto& rec = st.jobs[id];
  st.queued.erase({rec.submit_seq, id});
  attempt_record at;
  at.id = attempt_id{st.cfg.node, st.cfg.incarnation, ++st.attempt_seq};
  at.number = static_cast<int32_t>(rec.attempts.size()) + 1;
  at.outcome = "running";
  at.started_ms = now_ms();
  auto dir = path_join(st.cfg.data_dir, "logs/" + id.str());
  ::mkdir(path_join(st.cfg.data_dir, "logs").c_str(), 0755);
  ::mkdir(dir.c_str(), 0755);
  at.log_out = dir + "/" + std::to_string(at.number) + ".out";
  at.log_err = dir + "/" + std::to_string(at.number) + ".err";
  run_info run;
  run.attempt = at.number;
  run.use = need_of(rec.spec);
  for (int i = 0; i < rec.spec.gpus && !st.free_gpus.empty(); ++i) {
    run.gpus.push_back(*st.free_gpus.begin());
    st.free_gpus.erase(st.free_gpus.begin());
  }
  run.end_ms = rec.spec.timeout_s > 0 ? at.started_ms + static_cast<int64_t>(rec.spec.timeout_s
                                                                             * 1000)
                                      : no_end;
  auto gpus = run.gpus;
  at.gpus.assign(gpus.begin(), gpus.end());
  st.running[id] = std::move(run);
  rec.attempts.push_back(at);
  touch(rec, job_state::running, "attempt " + std::to_string(at.number) + " started");
  auto args = worker_args_for(st, rec, at);
  args.request = build_launch(st.cfg, rec, at, gpus);
  // The child starts now; its record is journaled in the same grouped commit as its pid
  // soon after. A crash before that commit kills the child (PR_SET_PDEATHSIG) and, with
  // cgroups, everything it started (recovery empties the node's cgroups), so the job is
  // simply still queued: execution is at-least-once, the recorded result exactly-once.
  spawn_worker_for(self, id, args);
  persist(self, {rec}, [] {});
}

/// Applies the end of an attempt to the record; returns false if it was a duplicate.
bool finish_attempt(coordinator_actor* self, const job_id& id, int32_t number,
                    const attempt_result& res) {
  auto& st = self->state;
  auto it = st.jobs.find(id);
  if (it == st.jobs.end())
    return false;
  auto& rec = it->second;
  if (rec.state != job_state::running || rec.attempts.empty()
      || rec.attempts.back().number != number)
    return false; // delivered twice, or stale: already applied
  auto& at = rec.attempts.back();
  at.outcome = res.outcome;
  at.cause = res.cause;
  at.ended_ms = now_ms();
  at.exit_code = res.exit.exit_code;
  at.term_signal = res.exit.term_signal;
  at.max_rss_kb = res.exit.max_rss_kb;
  at.cpu_s = res.exit.cpu_s;
  if (auto r = st.running.find(id); r != st.running.end()) {
    for (int g : r->second.gpus)
      st.free_gpus.insert(g);
    if (r->second.worker)
      self->unlink_from(r->second.worker);
    st.running.erase(r);
  }
  auto label = "attempt " + std::to_string(number) + ": " + res.cause;
  if (res.outcome == "succeeded") {
    touch(rec, job_state::succeeded, label);
  } else if (res.outcome == "cancelled") {
    touch(rec, job_state::cancelled, label);
  } else if (res.outcome == "requeued") {
    touch(rec, job_state::queued, label + "; requeued without charging a retry");
  } else if (rec.retries_used < rec.spec.retries) {
    rec.retries_used += 1;
    touch(rec, job_state::queued,
          label + "; retry " + std::to_string(rec.retries_used) + " of "
            + std::to_string(rec.spec.retries));
  } else {
    touch(rec, res.outcome == "timeout" ? job_state::timed_out : job_state::failed, label);
  }
  if (rec.state == job_state::queued)
    st.queued.insert({rec.submit_seq, id});
  return true;
}

void maybe_finish_shutdown(coordinator_actor* self) {
  auto& st = self->state;
  // Chunks in flight finish and their final records are written first; with --drain the
  // queued tasks run too.
  bool tasks_idle = st.tasks.in_flight() == 0 && st.task_final.empty()
                    && !st.task_flush_in_flight
                    && (!st.draining || st.tasks.queued_tasks() == 0 || st.proxies.empty());
  if (!st.accepting && st.running.empty() && tasks_idle && !st.shutdown_waiters.empty()) {
    for (auto& rp : st.shutdown_waiters)
      rp.deliver(true);
    st.shutdown_waiters.clear();
  }
}

/// Dependency check: "" when met, else why it waits; sets `never` when it cannot be met.
std::string dependency_wait(coordinator_state& st, const job_record& rec, std::string& never) {
  for (auto& dep : rec.spec.after) {
    auto it = st.jobs.find(dep.job);
    if (it == st.jobs.end()) {
      never = "dependency " + dep.job.short_str() + " no longer exists";
      return never;
    }
    auto s = it->second.state;
    if (!is_final(s))
      return "waits for job " + dep.job.short_str() + " (" + dep.kind + ", now "
             + to_string(s) + ")";
    if (dep.kind == "ok" && s != job_state::succeeded) {
      never = "dependency " + dep.job.short_str() + " ended " + to_string(s)
              + ", so --after ok can never be met";
      return never;
    }
  }
  return {};
}

/// The queued jobs as placement sees them; jobs whose dependency can never be met are
/// put in `doomed` instead.
std::vector<queued_job> placement_queue(coordinator_state& st, std::vector<job_id>* doomed) {
  std::vector<queued_job> queue;
  queue.reserve(st.queued.size());
  for (auto& [seq, id] : st.queued) {
    auto& rec = st.jobs[id];
    std::string never;
    auto wait = dependency_wait(st, rec, never);
    if (!never.empty()) {
      if (doomed)
        doomed->push_back(id);
      continue;
    }
    queued_job q;
    q.id = id;
    q.priority = rec.spec.priority;
    q.submit_seq = rec.submit_seq;
    q.need = need_of(rec.spec);
    q.timeout_s = rec.spec.timeout_s;
    q.blocked = st.accepting ? wait : "the node is draining: it starts no new attempts";
    if (q.blocked.empty())
      if (auto o = st.offered.find(id); o != st.offered.end() && o->second > now_ms())
        q.blocked = "offered to another node (a reservation request is under way)";
    queue.push_back(std::move(q));
  }
  return queue;
}

std::vector<running_job> placement_running(coordinator_state& st) {
  std::vector<running_job> running;
  running.reserve(st.running.size());
  for (auto& [id, run] : st.running)
    running.push_back({id, run.use, run.end_ms});
  return running;
}

void schedule(coordinator_actor* self) {
  auto& st = self->state;
  st.schedule_queued = false;
  if (!st.accepting && !st.draining)
    return;
  if (!st.majority)
    return; // a minority starts no new attempts; running ones go on
  std::vector<job_id> doomed;
  auto queue = placement_queue(st, &doomed);
  record_list cancelled;
  for (auto& id : doomed) {
    auto& rec = st.jobs[id];
    std::string never;
    dependency_wait(st, rec, never);
    st.queued.erase({rec.submit_seq, id});
    touch(rec, job_state::cancelled, never);
    cancelled.push_back(rec);
  }
  if (!cancelled.empty())
    persist(self, std::move(cancelled), [=] { request_schedule(self); });
  // The hot path builds no explanations; `why` recomputes them when asked.
  auto plan = plan_placement(st.cfg.total, placement_running(st), std::move(queue), now_ms(),
                             false);
  for (auto& id : plan.start)
    start_attempt(self, id);
}

/// Why a queued job waits, from the same placement run with explanations.
std::string explain_wait(coordinator_state& st, const job_id& id) {
  auto queue = placement_queue(st, nullptr);
  for (auto& q : queue)
    q.label = q.id.short_str();
  auto plan = plan_placement(st.cfg.total, placement_running(st), std::move(queue), now_ms(), true);
  if (auto it = plan.why.find(id); it != plan.why.end())
    return it->second;
  for (auto& s : plan.start)
    if (s == id)
      return "queued; it fits now and starts at the next placement";
  return "queued; placement runs next";
}

// ---- tasks --------------------------------------------------------------------------

/// Hands chunks to the proxies while they have room (two chunks per slot).
void pump_tasks(coordinator_actor* self) {
  auto& st = self->state;
  if (!st.accepting && !st.draining)
    return;
  int64_t total_slots = 0;
  for (auto& p : st.proxies)
    total_slots += p.slots;
  if (total_slots == 0)
    return;
  for (auto& p : st.proxies) {
    auto window = static_cast<size_t>(2 * p.slots);
    while (p.chunks.size() < window && st.tasks.queued_tasks() > 0) {
      // Spread a small queue over every slot; cap a large one at the configured chunk.
      auto share = st.tasks.queued_tasks() / static_cast<uint64_t>(2 * total_slots);
      auto size = std::clamp<uint64_t>(share, 1, std::max<uint32_t>(1, st.cfg.task_chunk));
      auto c = st.tasks.next(size);
      if (!c)
        break;
      p.chunks.insert(c->seq);
      self->send(p.handle, atoms::run_tasks::value, std::move(*c));
    }
  }
}

void deliver_task_waiters(coordinator_actor* self, const job_id& id) {
  auto& st = self->state;
  auto it = st.task_waiters.find(id);
  if (it == st.task_waiters.end())
    return;
  auto body = encode(*st.tasks.status(id));
  for (auto& w : it->second)
    w.rp.deliver(body);
  st.task_waiters.erase(it);
}

/// Writes the final records gathered so far: one journal write in flight at a time, so
/// everything reported meanwhile joins the next one.
void flush_task_finals(coordinator_actor* self) {
  auto& st = self->state;
  st.task_flush_queued = false;
  if (st.task_flush_in_flight || st.task_final.empty())
    return;
  merge_ranges(st.task_final);
  write_batch batch;
  batch.task_ranges = std::move(st.task_final);
  st.task_final.clear();
  auto ranges = batch.task_ranges;
  st.task_flush_in_flight = true;
  self->request(st.journal, caf::infinite, atoms::write::value, std::move(batch))
    .then(
      [=](bool) {
        auto& st = self->state;
        st.task_flush_in_flight = false;
        for (auto& id : st.tasks.durable(ranges, now_ms()))
          deliver_task_waiters(self, id);
        if (!st.task_final.empty())
          flush_task_finals(self);
        maybe_finish_shutdown(self);
      },
      [=](const caf::error& err) {
        auto& st = self->state;
        st.log->error("journal write of {} task final records failed: {}; retrying",
                      ranges.size(), describe(err));
        st.task_flush_in_flight = false;
        st.task_final.insert(st.task_final.end(), ranges.begin(), ranges.end());
        st.task_flush_queued = true;
        self->delayed_send(self, std::chrono::milliseconds(200), atoms::task_flush::value);
      });
}

void on_task_done(coordinator_actor* self, const chunk_result& r) {
  auto& st = self->state;
  for (auto& p : st.proxies)
    if (p.chunks.erase(r.seq) > 0)
      break;
  auto ranges = st.tasks.report(r, now_ms());
  st.task_final.insert(st.task_final.end(), std::make_move_iterator(ranges.begin()),
                       std::make_move_iterator(ranges.end()));
  if (!st.task_flush_queued && !st.task_flush_in_flight) {
    st.task_flush_queued = true;
    self->send(self, atoms::task_flush::value); // behind the reports already queued
  }
  pump_tasks(self);
}

/// Asks the devices supervisor for the proxy of device `name`, and monitors it.
void discover_proxy(coordinator_actor* self, const std::string& name) {
  auto& st = self->state;
  if (!st.devices)
    return;
  self->request(st.devices, std::chrono::seconds(5), atoms::which::value, name)
    .then(
      [=](const caf::actor& proxy) {
        self->request(proxy, std::chrono::seconds(5), atoms::info::value)
          .then(
            [=](const std::string& body) {
              auto row = decode<device_row>(body, "device info");
              auto& st = self->state;
              for (auto& p : st.proxies)
                if (p.name == name)
                  return; // found twice
              proxy_ref ref;
              ref.name = name;
              ref.handle = proxy;
              ref.slots = row ? std::max(1, row->slots) : 1;
              self->monitor(proxy);
              st.proxies.push_back(std::move(ref));
              st.log->debug("device proxy {} joined with {} slots", name, st.proxies.back().slots);
              pump_tasks(self);
            },
            [=](const caf::error&) {
              self->delayed_send(self, std::chrono::milliseconds(200), atoms::discover::value,
                                 name);
            });
      },
      [=](const caf::error&) {
        self->delayed_send(self, std::chrono::milliseconds(200), atoms::discover::value, name);
      });
}

/// Batch named by a full id or a unique suffix of at least 6 characters.
expected<job_id> resolve_batch(coordinator_state& st, const std::string& text) {
  if (auto id = job_id::parse(text)) {
    if (st.tasks.has(*id))
      return *id;
    return failure{"no task batch " + text + " on this node"};
  }
  if (text.size() < 6)
    return failure{"'" + text + "' is too short to name a task batch: give at least 6 characters"};
  std::string upper;
  for (char c : text)
    upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::vector<job_id> hits;
  for (auto& b : st.tasks.list()) {
    auto s = b.id.str();
    if (s.size() >= upper.size() && s.compare(s.size() - upper.size(), upper.size(), upper) == 0)
      hits.push_back(b.id);
  }
  if (hits.empty())
    return failure{"no task batch " + text + " on this node"};
  if (hits.size() > 1)
    return failure{"'" + text + "' is ambiguous: " + std::to_string(hits.size())
                   + " task batches end with it"};
  return hits.front();
}

void on_submit_tasks(coordinator_actor* self, caf::response_promise rp,
                     submit_tasks_request req) {
  auto& st = self->state;
  if (!st.accepting)
    return rp.deliver(make_error(errc::refused, "the node is shutting down and accepts no tasks"));
  if (!find_task_kind(req.kind)) {
    std::string known;
    for (auto& k : task_kinds())
      known += (known.empty() ? "" : ", ") + k;
    return rp.deliver(make_error(errc::bad_request, "kind: no task kind '" + req.kind
                                                      + "' (known: " + known + ")"));
  }
  if (req.count == 0 || req.count > max_tasks_per_batch)
    return rp.deliver(make_error(errc::bad_request,
                                 "count: must be between 1 and "
                                   + std::to_string(max_tasks_per_batch) + ", not "
                                   + std::to_string(req.count)));
  if (req.kind == "sleep" && req.arg > 3'600'000'000ull)
    return rp.deliver(make_error(errc::bad_request, "arg: a sleep task sleeps at most an hour"));
  if (!req.client_key.empty()) {
    if (auto id = st.tasks.by_key(req.client_key))
      return rp.deliver(reply(submit_tasks_reply{*id, true}));
    if (auto it = st.task_key_in_flight.find(req.client_key); it != st.task_key_in_flight.end()) {
      it->second.push_back(rp);
      return;
    }
    st.task_key_in_flight[req.client_key];
  }
  task_batch b;
  b.id = job_id::generate();
  b.kind = req.kind;
  b.arg = req.arg;
  b.count = req.count;
  b.priority = req.priority;
  b.owner = st.cfg.node;
  b.user = req.user;
  b.host = req.host;
  b.client_key = req.client_key;
  b.submitted_ms = now_ms();
  write_batch w;
  w.task_batches.push_back(b);
  auto key = req.client_key;
  self->request(st.journal, caf::infinite, atoms::write::value, std::move(w))
    .then(
      [=](bool) mutable {
        auto& st = self->state;
        st.tasks.add(b, {});
        auto body = reply(submit_tasks_reply{b.id, false});
        settle_key(st.task_key_in_flight, key, body);
        rp.deliver(body);
        pump_tasks(self);
      },
      [=](const caf::error& err) mutable {
        auto e = make_error(errc::journal_failure,
                            "the task batch could not be made durable: " + describe(err));
        settle_key(self->state.task_key_in_flight, key, e);
        rp.deliver(e);
      });
}

void on_wait_tasks(coordinator_actor* self, caf::response_promise rp,
                   const wait_tasks_request& req) {
  auto& st = self->state;
  auto id = resolve_batch(st, req.id);
  if (!id)
    return rp.deliver(make_error(errc::not_found, id.error()));
  if (req.timeout_ms == 0 || st.tasks.complete(*id))
    return rp.deliver(encode(*st.tasks.status(*id)));
  auto seq = ++st.task_waiter_seq;
  st.task_waiters[*id].push_back({seq, rp});
  auto wait = std::chrono::milliseconds(std::min<uint32_t>(req.timeout_ms, 60000));
  self->delayed_send(self, wait, atoms::task_wait::value, *id, seq);
}

void on_task_wait_timeout(coordinator_actor* self, const job_id& id, uint64_t seq) {
  auto& st = self->state;
  auto it = st.task_waiters.find(id);
  if (it == st.task_waiters.end())
    return;
  auto& ws = it->second;
  for (auto w = ws.begin(); w != ws.end(); ++w) {
    if (w->seq != seq)
      continue;
    w->rp.deliver(encode(*st.tasks.status(id)));
    ws.erase(w);
    break;
  }
  if (ws.empty())
    st.task_waiters.erase(it);
}

// ---- client verbs -----------------------------------------------------------------

job_summary summarize(const job_record& rec) {
  job_summary s;
  s.id = rec.id;
  s.name = display_name(rec.spec);
  s.state = rec.state;
  s.attempts = static_cast<int32_t>(rec.attempts.size());
  s.priority = rec.spec.priority;
  s.cpus = rec.spec.cpus;
  s.gpus = rec.spec.gpus;
  s.submitted_ms = rec.submitted_ms;
  s.updated_ms = rec.updated_ms;
  s.exit_code = rec.attempts.empty() ? -1 : rec.attempts.back().exit_code;
  s.reason = rec.reason;
  s.owner = rec.owner.str();
  s.ran_on = rec.attempts.empty() ? std::string{} : rec.attempts.back().id.node.str();
  s.version = rec.version;
  for (auto& n : rec.replicas)
    s.holders.push_back(n);
  return s;
}

std::string why_text(coordinator_state& st, const job_record& rec) {
  switch (rec.state) {
    case job_state::queued:
      if (!st.accepting && !st.draining)
        return "the node is shutting down";
      if (!st.majority)
        return minority_text(st) + ": it starts no new attempts until it heals";
      return explain_wait(st, rec.id);
    case job_state::running:
      return "running attempt " + std::to_string(rec.attempts.back().number) + " (pid "
             + std::to_string(rec.attempts.back().pid) + ")";
    default:
      return std::string("finished: ") + to_string(rec.state) + " (" + rec.reason + ")";
  }
}

/// Accepts a submission as its owner: records durable here and on the other holders.
void accept_submit(coordinator_actor* self, caf::response_promise rp, submit_request req) {
  auto& st = self->state;
  if (!st.accepting)
    return rp.deliver(make_error(errc::refused, "the node is shutting down and accepts no jobs"));
  if (!st.majority)
    return rp.deliver(make_error(errc::refused, minority_text(st)
                                                  + "; submissions are refused until it heals"));
  if (auto problem = validate(req.spec); !problem.empty())
    return rp.deliver(make_error(errc::bad_request, "invalid job spec: " + problem));
  if (req.spec.array_index >= 0)
    return rp.deliver(make_error(errc::bad_request, "array_index: set by the node, not by clients"));
  if (!req.spec.app.empty()) // the app registry comes with the experiment SDK
    return rp.deliver(make_error(errc::bad_request, "app: no app '" + req.spec.app
                                                      + "' is registered on this node"));
  for (auto& dep : req.spec.after)
    if (!st.jobs.count(dep.job))
      return rp.deliver(make_error(errc::bad_request,
                                   "after: no job " + dep.job.str() + " on this node"));
  if (!req.client_key.empty()) {
    if (auto it = st.by_key.find(req.client_key); it != st.by_key.end()) {
      submit_reply r;
      r.ids = it->second;
      r.duplicate = true;
      return rp.deliver(reply(r));
    }
    if (auto it = st.key_in_flight.find(req.client_key); it != st.key_in_flight.end()) {
      it->second.push_back(rp);
      return;
    }
    st.key_in_flight[req.client_key];
  }
  std::vector<int32_t> indices{-1};
  if (!req.spec.array.empty())
    indices = *expand_array(req.spec.array);
  if (st.queued.size() + indices.size() > st.cfg.max_queued) {
    auto e = make_error(errc::busy, "the node's queue is full (" + std::to_string(st.queued.size())
                                      + " queued jobs, --max-queued "
                                      + std::to_string(st.cfg.max_queued)
                                      + "): try again later");
    settle_key(st.key_in_flight, req.client_key, e);
    return rp.deliver(e);
  }
  if (!req.spec.has_seed) {
    random_bytes(&req.spec.seed, sizeof(req.spec.seed));
    req.spec.seed &= 0x7FFFFFFFFFFFFFFFull;
    req.spec.has_seed = true;
  }
  // Holders: this node first, then the other alive members by rendezvous rank.
  std::vector<std::string> replicas{self_node(st)};
  {
    std::vector<std::string> others;
    for (auto& n : alive_nodes(st))
      if (n != self_node(st))
        others.push_back(n);
    auto key = req.client_key.empty() ? job_id::generate().str() : req.client_key;
    for (auto& n : rendezvous_rank(key, others))
      if (replicas.size() < st.cfg.replicas)
        replicas.push_back(n);
  }
  if (replicas.size() < st.cfg.min_replicas) {
    settle_key(st.key_in_flight, req.client_key,
               make_error(errc::refused, "too few members alive"));
    return rp.deliver(make_error(
      errc::refused, "only " + std::to_string(replicas.size())
                       + " members are alive to hold the job, fewer than --min-replicas "
                       + std::to_string(st.cfg.min_replicas)
                       + ": the submission is refused so that no accepted job can be lost"));
  }
  record_list recs;
  auto now = now_ms();
  for (auto idx : indices) {
    job_record rec;
    rec.id = job_id::generate();
    rec.spec = req.spec;
    rec.spec.array_index = idx;
    if (idx >= 0)
      rec.spec.seed = req.spec.seed + static_cast<uint64_t>(idx);
    rec.owner = st.cfg.node;
    rec.submit_seq = ++st.next_seq;
    rec.submitted_ms = now;
    rec.client_key = req.client_key;
    rec.replicas = replicas;
    touch(rec, job_state::queued, "submitted");
    recs.push_back(std::move(rec));
  }
  auto key = req.client_key;
  persist(
    self, recs,
    [=]() mutable {
      auto& st = self->state;
      submit_reply r;
      for (auto& rec : recs) {
        r.ids.push_back(rec.id);
        st.queued.insert({rec.submit_seq, rec.id});
        st.jobs[rec.id] = std::move(rec);
      }
      auto body = reply(r);
      if (!key.empty())
        st.by_key[key] = r.ids;
      settle_key(st.key_in_flight, key, body);
      rp.deliver(body);
      request_schedule(self);
    },
    [=](const caf::error& err) mutable {
      auto e = make_error(errc::journal_failure,
                          "the job could not be made durable: " + describe(err));
      settle_key(self->state.key_in_flight, key, e);
      rp.deliver(e);
    });
}

void forward_submit(coordinator_actor* self, caf::response_promise rp, submit_request req,
                    const std::string& owner);

/// A submission from a client: the owner is chosen by rendezvous hashing of its key over
/// the alive members able to run it; this node forwards it there (once), or accepts it.

void on_submit(coordinator_actor* self, caf::response_promise rp, submit_request req) {
  auto& st = self->state;
  if (!st.accepting)
    return rp.deliver(make_error(errc::refused, "the node is shutting down and accepts no jobs"));
  if (!st.majority)
    return rp.deliver(make_error(errc::refused, minority_text(st)
                                                  + "; submissions are refused until it heals"));
  auto alive = alive_nodes(st);
  if (req.hops > 0 || alive.size() <= 1 || !st.membership)
    return accept_submit(self, rp, std::move(req));
  if (req.client_key.empty()) // a key makes forwarding safe to retry
    req.client_key = random_key();
  std::vector<holder_candidate> candidates;
  candidates.push_back({self_node(st), st.cfg.total.cpus, st.cfg.total.gpus});
  for (auto& m : st.members)
    if (m.node != self_node(st) && m.state == member_state::alive)
      candidates.push_back({m.node, m.cpus, m.gpus});
  // A job that depends on others goes to the owner of its first dependency, if known here.
  std::string key = req.client_key;
  auto chosen = choose_holders(key, req.spec.cpus, req.spec.gpus, candidates, st.cfg.replicas);
  if (!chosen)
    return rp.deliver(make_error(errc::refused, "no member can run the job: " + chosen.error()));
  if (!req.spec.after.empty()) {
    // Dependencies are checked by the owner of the first one: the job goes there.
    auto dep = req.spec.after.front().job;
    if (st.jobs.count(dep)) {
      chosen->owner = self_node(st);
    } else if (auto h = st.held.find(dep);
               h != st.held.end() && is_alive(st, h->second.owner.str())) {
      chosen->owner = h->second.owner.str();
    } else {
      // Not known here: ask the members who owns it, then come back.
      std::vector<std::string> others;
      for (auto& n : alive_nodes(st))
        if (n != self_node(st))
          others.push_back(n);
      auto pending = std::make_shared<size_t>(others.size());
      auto found = std::make_shared<std::string>();
      for (auto& n : others)
        ask_node(self, n, verb::show, encode(id_request{dep.str(), true}), std::chrono::seconds(5))
          .then(
            [=](const std::string& body) mutable {
              if (auto r = decode<show_reply>(body, "show"); r && found->empty())
                *found = r->record.owner.str();
              if (--*pending == 0)
                forward_submit(self, rp, req, found->empty() ? self_node(self->state) : *found);
            },
            [=](const caf::error&) mutable {
              if (--*pending == 0)
                forward_submit(self, rp, req, found->empty() ? self_node(self->state) : *found);
            });
      return;
    }
  }
  forward_submit(self, rp, std::move(req), chosen->owner);
}

/// Sends a client's submission to its owner (or accepts it, when that is this node).
void forward_submit(coordinator_actor* self, caf::response_promise rp, submit_request req,
                    const std::string& owner) {
  if (owner == self_node(self->state))
    return accept_submit(self, rp, std::move(req));
  auto& st = self->state;
  if (st.forwards_in_flight >= st.cfg.max_forwards)
    return rp.deliver(make_error(errc::busy, "this node is forwarding "
                                               + std::to_string(st.forwards_in_flight)
                                               + " submissions already: try again later"));
  ++st.forwards_in_flight;
  req.hops = 1;
  auto body = encode(req);
  ask_node(self, owner, verb::submit, body, std::chrono::seconds(20))
    .then([=](std::string& body) mutable {
            auto& st = self->state;
            --st.forwards_in_flight;
            // Remember what was just accepted elsewhere: `jobs` here always shows the
            // caller's own new jobs, even while their owner does not answer.
            if (auto r = decode<submit_reply>(body, "submit"))
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
            rp.deliver(std::move(body));
          },
          [=](caf::error& err) mutable {
            --self->state.forwards_in_flight;
            if (err.category() == caf::atom("monkey")
                && err.code() == static_cast<uint8_t>(errc::busy))
              return rp.deliver(std::move(err)); // the owner's queue is full: say so
            // The owner went away meanwhile: this node takes the job if it can run it.
            self->state.log->warn("forwarding a submission to its owner {} failed ({}); "
                                  "accepting it here",
                                  owner, describe(err));
            auto again = req;
            accept_submit(self, rp, std::move(again));
          });
}

void on_cancel(coordinator_actor* self, caf::response_promise rp, const id_request& req) {
  auto& st = self->state;
  auto id = resolve(st, req.id);
  if (!id)
    return rp.deliver(make_error(errc::not_found, id.error()));
  auto& rec = st.jobs[*id];
  if (is_final(rec.state))
    return rp.deliver(make_error(errc::conflict, "job " + id->short_str() + " already ended ("
                                                   + to_string(rec.state) + ")"));
  if (rec.state == job_state::queued) {
    st.queued.erase({rec.submit_seq, *id});
    touch(rec, job_state::cancelled, "cancelled while queued");
    auto jid = *id;
    persist(self, {rec}, [=]() mutable {
      rp.deliver(reply(text_reply{"cancelled " + jid.short_str()}));
      request_schedule(self);
    });
    return;
  }
  auto& run = st.running[*id];
  if (run.worker)
    self->send(run.worker, atoms::stop::value, std::string("cancelled"));
  else
    run.stop_pending = "cancelled";
  rp.deliver(reply(text_reply{"cancelling " + id->short_str()
                              + " (SIGTERM to its process group, SIGKILL after the grace period)"}));
}

void on_logs(coordinator_actor* self, caf::response_promise rp, const logs_request& req) {
  auto& st = self->state;
  auto id = resolve(st, req.id);
  if (!id)
    return rp.deliver(make_error(errc::not_found, id.error()));
  auto& rec = st.jobs[*id];
  if (rec.attempts.empty()) {
    logs_reply r;
    r.job_final = r.finished = is_final(rec.state);
    return rp.deliver(reply(r));
  }
  int32_t n = req.attempt == 0 ? rec.attempts.back().number : req.attempt;
  if (n < 1 || n > static_cast<int32_t>(rec.attempts.size()))
    return rp.deliver(make_error(errc::not_found, "job " + id->short_str() + " has no attempt "
                                                    + std::to_string(n)));
  if (req.stream != "out" && req.stream != "err")
    return rp.deliver(make_error(errc::bad_request, "stream must be out or err"));
  auto& at = rec.attempts[static_cast<size_t>(n - 1)];
  logs_reply r;
  r.attempt = n;
  r.attempts = static_cast<int32_t>(rec.attempts.size());
  r.offset = req.offset;
  auto max = std::min<uint32_t>(req.max_bytes == 0 ? 65536 : req.max_bytes, 1 << 20);
  int fd = ::open((req.stream == "out" ? at.log_out : at.log_err).c_str(), O_RDONLY | O_CLOEXEC);
  bool at_end = true;
  if (fd >= 0) {
    r.data.resize(max);
    auto got = ::pread(fd, r.data.data(), max, static_cast<off_t>(req.offset));
    r.data.resize(got > 0 ? static_cast<size_t>(got) : 0);
    r.offset += r.data.size();
    struct stat sb {};
    ::fstat(fd, &sb);
    at_end = static_cast<uint64_t>(sb.st_size) <= r.offset;
    ::close(fd);
  }
  bool last_attempt = n == rec.attempts.back().number;
  r.finished = at_end && (!last_attempt || at.outcome != "running");
  r.job_final = is_final(rec.state);
  rp.deliver(reply(r));
}

status_reply make_status(coordinator_state& st) {
  status_reply s;
  s.node = st.cfg.node.str();
  s.incarnation = st.cfg.incarnation;
  s.address = st.cfg.address;
  s.pid = st.cfg.pid;
  s.started_ms = st.cfg.started_ms;
  s.version = st.cfg.version;
  s.accepting = st.accepting;
  for (auto& [id, rec] : st.jobs)
    s.jobs_by_state[to_string(rec.state)] += 1;
  s.cpus_total = st.cfg.total.cpus;
  s.gpus_total = st.cfg.total.gpus;
  s.mem_total_mb = st.cfg.total.mem_mb;
  s.cpus_free = s.cpus_total;
  s.mem_free_mb = s.mem_total_mb;
  for (auto& [id, run] : st.running) {
    s.cpus_free -= run.use.cpus;
    s.mem_free_mb -= run.use.mem_mb;
  }
  s.gpus_free = static_cast<int32_t>(st.free_gpus.size());
  s.tasks_queued = st.tasks.queued_tasks();
  s.tasks_in_flight = st.tasks.in_flight();
  for (auto& d : st.cfg.devices) {
    device_row row;
    row.name = d.name;
    row.kind = d.kind;
    row.model = d.model;
    row.slots = d.kind == "cpu" ? st.cfg.total.cpus : d.slots;
    row.free_slots = d.kind == "cpu" ? s.cpus_free : (st.free_gpus.count(d.index) ? 1 : 0);
    row.memory_mb = d.kind == "cpu" ? st.cfg.total.mem_mb : d.memory_mb;
    row.gflops = d.gflops;
    s.devices.push_back(row);
  }
  return s;
}

/// The job named by an id_request body, or nullopt after answering `rp` with the error.
std::optional<job_id> requested_job(coordinator_state& st, const envelope& env, const char* what,
                                    caf::response_promise& rp) {
  auto req = decode<id_request>(env.body, what);
  if (!req) {
    rp.deliver(make_error(errc::bad_request, req.error()));
    return std::nullopt;
  }
  auto id = resolve(st, req->id);
  if (!id) {
    rp.deliver(make_error(errc::not_found, id.error()));
    return std::nullopt;
  }
  return *id;
}


/// show, why, cancel and logs of a job this node owns.
void on_job_verb(coordinator_actor* self, caf::response_promise rp, const envelope& env) {
  auto& st = self->state;
  switch (static_cast<verb>(env.verb)) {
    case verb::show: {
      auto id = requested_job(st, env, "show", rp);
      if (!id)
        return;
      // The record is taken now, before the metrics: a final record then implies that its
      // worker's last metrics reached the journal before this request does.
      show_reply snapshot;
      snapshot.record = st.jobs[*id];
      snapshot.why = why_text(st, snapshot.record);
      self->request(st.journal, std::chrono::seconds(10), atoms::last_metrics::value, *id)
        .then(
          [=](const metric_map& last) mutable {
            auto r = snapshot;
            r.last_metrics = last;
            rp.deliver(reply(r));
          },
          [=](const caf::error& err) mutable { rp.deliver(err); });
      return;
    }
    case verb::why: {
      auto id = requested_job(st, env, "why", rp);
      if (!id)
        return;
      return rp.deliver(reply(text_reply{why_text(st, st.jobs[*id])}));
    }
    case verb::cancel: {
      auto req = decode<id_request>(env.body, "cancel");
      if (!req)
        return rp.deliver(make_error(errc::bad_request, req.error()));
      return on_cancel(self, rp, *req);
    }
    case verb::logs: {
      auto req = decode<logs_request>(env.body, "logs");
      if (!req)
        return rp.deliver(make_error(errc::bad_request, req.error()));
      return on_logs(self, rp, *req);
    }
    default:
      return rp.deliver(make_error(errc::bad_request, "not a job verb"));
  }
}

/// A held (replica) record by full id or unique suffix.
std::optional<job_id> resolve_held(coordinator_state& st, const std::string& text) {
  if (auto id = job_id::parse(text))
    return st.held.count(*id) ? std::optional<job_id>(*id) : std::nullopt;
  if (text.size() < 6)
    return std::nullopt;
  std::string upper;
  for (char c : text)
    upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::optional<job_id> hit;
  for (auto& [id, rec] : st.held) {
    auto s = id.str();
    if (s.size() >= upper.size() && s.compare(s.size() - upper.size(), upper.size(), upper) == 0) {
      if (hit)
        return std::nullopt;
      hit = id;
    }
  }
  return hit;
}

void show_held(coordinator_actor* self, caf::response_promise rp, const job_id& id) {
  show_reply r;
  r.record = self->state.held[id];
  r.why = "held here as a replica; owner " + r.record.owner.str();
  rp.deliver(reply(r));
}

/// Asks every other alive member (local=true); for show the newest record wins, for the
/// other verbs the first answer that is not "no such job".
void route_to_owner(coordinator_actor* self, caf::response_promise rp, const envelope& env,
                    const std::string& text) {
  auto& st = self->state;
  auto v = static_cast<verb>(env.verb);
  std::string body;
  if (v == verb::logs) {
    auto req = *decode<logs_request>(env.body, "logs");
    req.local = true;
    body = encode(req);
  } else {
    auto req = *decode<id_request>(env.body, to_string(v));
    req.local = true;
    body = encode(req);
  }
  std::vector<std::string> others;
  for (auto& n : alive_nodes(st))
    if (n != self_node(st))
      others.push_back(n);
  auto pending = std::make_shared<size_t>(others.size());
  auto best = std::make_shared<std::optional<std::string>>();
  auto best_version = std::make_shared<uint64_t>(0);
  auto owned_found = std::make_shared<bool>(false);
  auto problem = std::make_shared<std::string>();
  auto unreachable = std::make_shared<size_t>(0);
  auto finish = [=]() mutable {
    if (--*pending > 0)
      return;
    if (*best)
      return rp.deliver(**best);
    if (v == verb::show) // no owner answered: this node's replica is the best there is
      if (auto held = resolve_held(self->state, text))
        return show_held(self, rp, *held);
    auto where = *unreachable > 0 ? " (" + std::to_string(*unreachable)
                                      + " members did not answer: it may be on one of them)"
                                  : std::string{};
    rp.deliver(make_error(errc::not_found,
                          problem->empty() ? "no job " + text + " in the cluster" + where
                                           : *problem + where));
  };
  for (auto& n : others)
    ask_node(self, n, v, body, std::chrono::seconds(10))
      .then(
        [=](std::string& reply_body) mutable {
          if (v == verb::show) {
            if (auto r = decode<show_reply>(reply_body, "show")) {
              bool owned = r->record.owner.str() == n;
              // The owner's answer beats a replica's; among equals the newer record.
              if (!*best || (owned && !*owned_found)
                  || (owned == *owned_found && r->record.version > *best_version)) {
                *best = reply_body;
                *best_version = r->record.version;
                *owned_found = *owned_found || owned;
              }
            }
          } else if (!*best) {
            *best = reply_body;
          }
          finish();
        },
        [=](caf::error& err) mutable {
          auto text_err = describe(err);
          if (text_err.find("no job") == std::string::npos) {
            if (text_err.find("ambiguous") != std::string::npos
                || text_err.find("too short") != std::string::npos
                || text_err.find("already ended") != std::string::npos
                || text_err.find("has no attempt") != std::string::npos)
              *problem = text_err;
            else
              *unreachable += 1;
          }
          finish();
        });
}

/// Summaries of the records here: owned, and held as a replica when asked by a peer.
std::map<job_id, job_summary> local_summaries(coordinator_state& st, const list_request& req) {
  std::map<job_id, job_summary> out;
  auto add = [&](const job_record& rec) {
    if (!req.state.empty() && req.state != to_string(rec.state))
      return;
    auto it = out.find(rec.id);
    if (it == out.end() || it->second.version < rec.version)
      out[rec.id] = summarize(rec);
  };
  for (auto& [id, rec] : st.jobs)
    add(rec);
  for (auto& [id, rec] : st.held)
    add(rec);
  return out;
}

list_reply finish_list(std::map<job_id, job_summary>& merged, uint32_t limit) {
  list_reply r;
  for (auto& [id, s] : merged)
    r.jobs.push_back(s);
  std::sort(r.jobs.begin(), r.jobs.end(), [](const job_summary& a, const job_summary& b) {
    return a.submitted_ms != b.submitted_ms ? a.submitted_ms < b.submitted_ms : a.id < b.id;
  });
  if (limit > 0 && r.jobs.size() > limit)
    r.jobs.erase(r.jobs.begin(), r.jobs.end() - limit);
  return r;
}

constexpr size_t max_seen = 200'000;

/// Remembers the rows of a cluster-wide listing, and adds the remembered jobs that no
/// answer carried and whose every holder is dead or gone: "unavailable (replicas down)",
/// never silently missing. Such a row comes back as soon as a holder restarts.
void remember_and_mark_unavailable(coordinator_actor* self,
                                   std::map<job_id, job_summary>& merged, bool filtered) {
  auto& st = self->state;
  for (auto& [id, s] : merged)
    if (!s.unavailable)
      st.seen[id] = s;
  for (auto it = st.seen.begin(); it != st.seen.end();) {
    auto& s = it->second;
    if (merged.count(it->first)) {
      ++it;
      continue;
    }
    std::vector<std::string> down;
    bool reachable = false;
    for (auto& h : s.holders) {
      if (h == self_node(st)) {
        reachable = true;
        continue;
      }
      auto* m = find_member(st, h);
      if (m && (m->state == member_state::alive || m->state == member_state::suspect))
        reachable = true;
      else
        down.push_back(h);
    }
    if (reachable || s.holders.empty()) {
      // Not in any answer although a holder lives: the list is partial (that holder is
      // named as unreachable) and the last known row is shown, marked so; or the job was
      // removed by compaction (then it is forgotten after a day).
      if (!filtered && now_ms() - s.updated_ms < 86'400'000) {
        auto row = s;
        row.reason = "last known (its holders did not answer): " + s.reason;
        merged[it->first] = row;
      }
      ++it;
      continue;
    }
    if (!filtered) {
      auto row = s;
      row.unavailable = true;
      std::string who;
      for (auto& d : down)
        who += (who.empty() ? "" : ", ") + d;
      row.reason = "unavailable (replicas down: every holder is dead: " + who
                   + "); it returns when a holder restarts on its data directory";
      merged[it->first] = row;
    }
    ++it;
  }
  while (st.seen.size() > max_seen) {
    auto oldest = st.seen.begin();
    for (auto i = st.seen.begin(); i != st.seen.end(); ++i)
      if (i->second.submitted_ms < oldest->second.submitted_ms)
        oldest = i;
    st.seen.erase(oldest);
  }
}

/// `jobs`: one row per job of the cluster (its newest record among owners and replicas);
/// members that do not answer are named, and the list is then partial.
void on_list(coordinator_actor* self, caf::response_promise rp, const list_request& req) {
  auto& st = self->state;
  auto merged = std::make_shared<std::map<job_id, job_summary>>(local_summaries(st, req));
  std::vector<std::string> others;
  for (auto& n : alive_nodes(st))
    if (n != self_node(st))
      others.push_back(n);
  if (req.local || others.empty() || !st.membership)
    return rp.deliver(reply(finish_list(*merged, req.local ? 0 : req.limit)));
  auto peer_req = req;
  peer_req.local = true;
  peer_req.limit = 0;
  auto body = encode(peer_req);
  auto pending = std::make_shared<size_t>(others.size());
  auto unreachable = std::make_shared<std::vector<std::string>>();
  // A suspect member may hold jobs no one else has: the list is partial without it. (A
  // dead one's jobs were adopted by their surviving holders.)
  for (auto& m : st.members)
    if (m.node != self_node(st) && m.state == member_state::suspect)
      unreachable->push_back(m.node + " (suspect)");
  auto limit = req.limit;
  auto filtered = !req.state.empty();
  auto finish = [=]() mutable {
    if (--*pending > 0)
      return;
    remember_and_mark_unavailable(self, *merged, filtered);
    auto r = finish_list(*merged, limit);
    r.unreachable = *unreachable;
    rp.deliver(reply(r));
  };
  for (auto& n : others)
    ask_node(self, n, verb::list, body, std::chrono::seconds(10))
      .then(
        [=](const std::string& reply_body) mutable {
          if (auto r = decode<list_reply>(reply_body, "jobs"))
            for (auto& s : r->jobs) {
              auto it = merged->find(s.id);
              if (it == merged->end() || it->second.version < s.version)
                (*merged)[s.id] = s;
            }
          finish();
        },
        [=](const caf::error&) mutable {
          unreachable->push_back(n);
          finish();
        });
}

/// The version of this node's replica of `id` (0 when it holds none).
uint64_t held_version(const coordinator_state& st, const job_id& id) {
  auto h = st.held.find(id);
  return h == st.held.end() ? 0 : h->second.version;
}

/// A record handed over to this node by its draining owner: it is this node's job now.
void take_over(coordinator_actor* self, const job_record& rec) {
  auto& st = self->state;
  st.held.erase(rec.id);
  st.unsynced.erase(rec.id);
  if (auto it = st.jobs.find(rec.id); it != st.jobs.end())
    st.queued.erase({it->second.submit_seq, rec.id});
  st.jobs[rec.id] = rec;
  st.next_seq = std::max(st.next_seq, rec.submit_seq);
  if (rec.state == job_state::queued)
    st.queued.insert({rec.submit_seq, rec.id});
  if (!rec.client_key.empty())
    st.by_key[rec.client_key].push_back(rec.id);
  st.log->info("took over job {} ({}) from its draining owner", rec.id.short_str(),
               to_string(rec.state));
  request_schedule(self);
}

/// A replica stores what an owner sends; a record this node owns is given up only to a
/// newer record from its new owner (this node was taken for dead meanwhile).
/// Applies records sent by their owner (or fetched by anti-entropy): stores the newer ones
/// as replicas (or takes over those handed to this node); `answer` gets this node's copies
/// that are newer than what was sent. Returns what must go to the journal.
record_list apply_replicas(coordinator_actor* self, const std::vector<job_record>& records,
                           replicate_reply& answer) {
  auto& st = self->state;
  record_list store;
  for (auto& rec : records) {
    if (auto it = st.jobs.find(rec.id); it != st.jobs.end() && it->second.version > rec.version)
      answer.newer.push_back(it->second);
    else if (auto h = st.held.find(rec.id); h != st.held.end() && h->second.version > rec.version)
      answer.newer.push_back(h->second);
    if (rec.owner == st.cfg.node) {
      // Handed over by a draining owner (a new ownership term): this node owns it now.
      auto it = st.jobs.find(rec.id);
      if ((it == st.jobs.end() || it->second.version < rec.version) && !st.running.count(rec.id)
          && rec.version > held_version(st, rec.id)) {
        take_over(self, rec);
        store.push_back(rec);
      }
      continue;
    }
    if (auto it = st.jobs.find(rec.id); it != st.jobs.end()) {
      if (rec.version <= it->second.version || st.running.count(rec.id))
        continue;
      st.log->warn("job {} was adopted by {} (version {} > {}): this node holds it as a replica "
                   "now",
                   rec.id.short_str(), rec.owner.str(), rec.version, it->second.version);
      st.queued.erase({it->second.submit_seq, rec.id});
      st.jobs.erase(it);
    }
    st.unsynced.erase(rec.id);
    auto h = st.held.find(rec.id);
    if (h != st.held.end() && h->second.version >= rec.version)
      continue;
    st.held[rec.id] = rec;
    store.push_back(rec);
  }
  return store;
}

void on_replicate(coordinator_actor* self, caf::response_promise rp, replicate_request req) {
  auto& st = self->state;
  replicate_reply answer;
  auto store = apply_replicas(self, req.records, answer);
  if (store.empty())
    return rp.deliver(reply(answer));
  write_batch batch;
  batch.records = std::move(store);
  self->request(st.journal, caf::infinite, atoms::write::value, std::move(batch))
    .then([=](bool) mutable { rp.deliver(reply(answer)); },
          [=](const caf::error& err) mutable {
            rp.deliver(make_error(errc::journal_failure, "replica write failed: " + describe(err)));
          });
}

// ---- anti-entropy: replicas reconcile by version, one page in flight per peer --------------

/// The version of the newest copy of `id` here (owned or held; 0 when none).
uint64_t local_version(const coordinator_state& st, const job_id& id) {
  uint64_t v = held_version(st, id);
  if (auto it = st.jobs.find(id); it != st.jobs.end())
    v = std::max(v, it->second.version);
  return v;
}

void on_digest(coordinator_actor* self, caf::response_promise rp, const digest_request& req) {
  auto& st = self->state;
  auto after = job_id::parse(req.after);
  auto limit = std::clamp<uint32_t>(req.limit, 1, 4096);
  std::vector<digest_entry> all;
  auto consider = [&](const job_record& rec) {
    if (after && !(*after < rec.id))
      return;
    if (std::find(rec.replicas.begin(), rec.replicas.end(), req.from) == rec.replicas.end())
      return;
    all.push_back({rec.id, rec.version});
  };
  for (auto& [id, rec] : st.jobs)
    consider(rec);
  for (auto& [id, rec] : st.held)
    if (!st.jobs.count(id))
      consider(rec);
  digest_reply r;
  r.more = all.size() > limit;
  if (r.more)
    std::nth_element(all.begin(), all.begin() + limit, all.end(),
                     [](const digest_entry& a, const digest_entry& b) { return a.id < b.id; });
  all.resize(std::min<size_t>(all.size(), limit));
  std::sort(all.begin(), all.end(),
            [](const digest_entry& a, const digest_entry& b) { return a.id < b.id; });
  r.entries = std::move(all);
  rp.deliver(reply(r));
}

void on_fetch(coordinator_actor* self, caf::response_promise rp, const fetch_request& req) {
  auto& st = self->state;
  replicate_request out;
  out.from = self_node(st);
  for (auto& id : req.ids) {
    const job_record* best = nullptr;
    if (auto it = st.jobs.find(id); it != st.jobs.end())
      best = &it->second;
    if (auto h = st.held.find(id); h != st.held.end() && (!best || h->second.version > best->version))
      best = &h->second;
    if (best)
      out.records.push_back(*best);
  }
  rp.deliver(reply(out));
}

/// One anti-entropy step with the next peer (round robin): ask it for a page of the records
/// it has that list this node as a holder; take the newer ones, send back this node's
/// newer copies. The cursor moves on per peer; at the end it starts over.
void anti_entropy_step(coordinator_actor* self) {
  auto& st = self->state;
  if (!st.majority || !st.synced || !st.membership || !st.accepting)
    return;
  std::vector<std::string> peers;
  for (auto& n : alive_nodes(st))
    if (n != self_node(st))
      peers.push_back(n);
  if (peers.empty())
    return;
  auto peer = peers[st.ae_next++ % peers.size()];
  if (st.ae_in_flight.count(peer))
    return;
  st.ae_in_flight.insert(peer);
  digest_request req{self_node(st), st.ae_cursor[peer], 512};
  auto done = [=](size_t taken, size_t sent) {
    auto& st = self->state;
    st.ae_in_flight.erase(peer);
    st.ae_taken += taken;
    st.ae_sent += sent;
    if (taken + sent > 0)
      st.log->info("anti-entropy with {}: took {} newer records, sent {}", peer, taken, sent);
  };
  ask_node(self, peer, verb::peer_digest, encode(req), std::chrono::seconds(5))
    .then(
      [=](const std::string& body) {
        auto& st = self->state;
        auto r = decode<digest_reply>(body, "digest");
        if (!r)
          return done(0, 0);
        st.ae_cursor[peer] = r->more && !r->entries.empty() ? r->entries.back().id.str() : "";
        fetch_request want{self_node(st), {}};
        replicate_request push{self_node(st), {}};
        for (auto& e : r->entries) {
          auto mine = local_version(st, e.id);
          if (e.version > mine)
            want.ids.push_back(e.id);
          else if (mine > e.version) {
            if (auto it = st.jobs.find(e.id); it != st.jobs.end() && it->second.version == mine)
              push.records.push_back(it->second);
            else if (auto h = st.held.find(e.id); h != st.held.end())
              push.records.push_back(h->second);
          }
        }
        auto sent = push.records.size();
        if (sent > 0)
          ask_node(self, peer, verb::peer_replicate, encode(push), std::chrono::seconds(5))
            .then([](const std::string&) {}, [](const caf::error&) {});
        if (want.ids.empty())
          return done(0, sent);
        ask_node(self, peer, verb::peer_fetch, encode(want), std::chrono::seconds(5))
          .then(
            [=](const std::string& body) {
              auto recs = decode<replicate_request>(body, "fetch");
              if (!recs)
                return done(0, sent);
              replicate_reply ignored;
              auto store = apply_replicas(self, recs->records, ignored);
              auto taken = store.size();
              if (!store.empty()) {
                write_batch batch;
                batch.records = std::move(store);
                self->request(self->state.journal, caf::infinite, atoms::write::value,
                              std::move(batch))
                  .then([](bool) {}, [](const caf::error&) {});
              }
              done(taken, sent);
            },
            [=](const caf::error&) { done(0, sent); });
      },
      [=](const caf::error&) { done(0, 0); });
}

void on_drain(coordinator_actor* self, caf::response_promise rp, const id_request& req);
void on_reserve(coordinator_actor* self, caf::response_promise rp, replicate_request req);

/// Decodes the request of `env` as `Request` and hands it to `handle`, or answers
/// bad_request naming what is wrong.
template <class Request, class Handle>
void dispatch(caf::response_promise& rp, const envelope& env, const char* what,
              Handle handle) {
  auto req = decode<Request>(env.body, what);
  if (!req)
    return rp.deliver(make_error(errc::bad_request, req.error()));
  handle(std::move(*req));
}

void on_envelope(coordinator_actor* self, const envelope& env) {
  auto rp = self->make_response_promise();
  auto& st = self->state;
  switch (static_cast<verb>(env.verb)) {
    case verb::submit: {
      auto req = decode<submit_request>(env.body, "submit");
      if (!req)
        return rp.deliver(make_error(errc::bad_request, req.error()));
      return on_submit(self, rp, std::move(*req));
    }
    case verb::list: {
      auto req = decode<list_request>(env.body, "jobs");
      if (!req)
        return rp.deliver(make_error(errc::bad_request, req.error()));
      return on_list(self, rp, *req);
    }
    case verb::show:
    case verb::why:
    case verb::cancel:
    case verb::logs: {
      // Answered by the job's owner: here, or asked of every other member.
      std::string text;
      bool local = false;
      if (static_cast<verb>(env.verb) == verb::logs) {
        auto req = decode<logs_request>(env.body, "logs");
        if (!req)
          return rp.deliver(make_error(errc::bad_request, req.error()));
        text = req->id, local = req->local;
      } else {
        auto req = decode<id_request>(env.body, to_string(static_cast<verb>(env.verb)));
        if (!req)
          return rp.deliver(make_error(errc::bad_request, req.error()));
        text = req->id, local = req->local;
      }
      bool here = static_cast<bool>(resolve(st, text));
      bool alone = alive_nodes(st).size() <= 1 || !st.membership;
      if (!here && static_cast<verb>(env.verb) == verb::show && (local || alone)
          && resolve_held(st, text))
        return show_held(self, rp, *resolve_held(st, text));
      if (here || local || alone)
        return on_job_verb(self, rp, env);
      return route_to_owner(self, rp, env, text);
    }
    case verb::peer_replicate: {
      auto req = decode<replicate_request>(env.body, "peer replicate");
      if (!req)
        return rp.deliver(make_error(errc::bad_request, req.error()));
      return on_replicate(self, rp, std::move(*req));
    }
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
    case verb::drain:
      return dispatch<id_request>(rp, env, "drain",
                                  [&](id_request r) { on_drain(self, rp, r); });
    case verb::status:
    case verb::devices:
    case verb::nodes:
      return rp.deliver(reply(make_status(st)));
    case verb::submit_tasks: {
      auto req = decode<submit_tasks_request>(env.body, "tasks submit");
      if (!req)
        return rp.deliver(make_error(errc::bad_request, req.error()));
      return on_submit_tasks(self, rp, std::move(*req));
    }
    case verb::list_tasks: {
      auto req = decode<list_request>(env.body, "tasks");
      if (!req)
        return rp.deliver(make_error(errc::bad_request, req.error()));
      task_list_reply r;
      r.batches = st.tasks.list();
      if (req->limit > 0 && r.batches.size() > req->limit)
        r.batches.erase(r.batches.begin(), r.batches.end() - req->limit);
      return rp.deliver(reply(r));
    }
    case verb::wait_tasks: {
      auto req = decode<wait_tasks_request>(env.body, "tasks wait");
      if (!req)
        return rp.deliver(make_error(errc::bad_request, req.error()));
      return on_wait_tasks(self, rp, *req);
    }
    default:
      return rp.deliver(make_error(errc::bad_request,
                                   "unknown verb " + std::to_string(env.verb)));
  }
}


// ---- recovery -----------------------------------------------------------------------

/// The running attempt of `rec` is lost (`cause`): requeued from --max-requeues, or lost.
void mark_lost(job_record& rec, const std::string& cause) {
  auto& at = rec.attempts.back();
  at.outcome = "lost";
  at.cause = cause;
  at.ended_ms = now_ms();
  if (rec.requeues_used < rec.spec.max_requeues) {
    rec.requeues_used += 1;
    touch(rec, job_state::queued,
          cause + "; requeue " + std::to_string(rec.requeues_used) + " of "
            + std::to_string(rec.spec.max_requeues) + " (retries not charged)");
  } else {
    touch(rec, job_state::lost, cause + "; no requeues left");
  }
}

/// True when other members hold copies of this record, which may have moved on while this
/// node was down (another node adopted the job): it must hear from them before running it.
bool needs_sync(const coordinator_state& st, const job_record& rec) {
  if (is_final(rec.state))
    return false;
  for (auto& n : rec.replicas)
    if (n != self_node(st))
      return true;
  return false;
}

void recover(coordinator_actor* self, record_list& recs) {
  auto& st = self->state;
  record_list changed;
  size_t lost = 0, readopted = 0, killed = 0, held = 0, unsynced = 0;
  for (auto& rec : recs) {
    st.next_seq = std::max(st.next_seq, rec.submit_seq);
    if (!rec.client_key.empty())
      st.by_key[rec.client_key].push_back(rec.id);
    if (rec.owner != st.cfg.node) { // a replica of another owner's job
      ++held;
      st.held[rec.id] = std::move(rec);
      continue;
    }
    bool same_process = rec.state == job_state::running && !rec.attempts.empty()
                        && rec.attempts.back().id.node == st.cfg.node
                        && rec.attempts.back().id.incarnation == st.cfg.incarnation;
    if (!same_process && needs_sync(st, rec)) {
      if (rec.state == job_state::running && !rec.attempts.empty()) {
        auto& at = rec.attempts.back();
        killed += static_cast<size_t>(kill_leftovers(at.cgroup, at.pgid, at.start_ticks));
      }
      ++unsynced;
      st.unsynced[rec.id] = std::move(rec);
      continue;
    }
    if (rec.state == job_state::running && !rec.attempts.empty()) {
      auto& at = rec.attempts.back();
      if (at.id.node == st.cfg.node && at.id.incarnation == st.cfg.incarnation) {
        // This process still runs it: the coordinator itself was restarted. Re-adopt.
        st.attempt_seq = std::max(st.attempt_seq, at.id.seq);
        run_info run;
        run.attempt = at.number;
        run.use = need_of(rec.spec);
        run.end_ms = rec.spec.timeout_s > 0
                       ? at.started_ms + static_cast<int64_t>(rec.spec.timeout_s * 1000)
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
        st.jobs[rec.id] = rec;
        spawn_worker_for(self, rec.id, args);
        ++readopted;
        continue;
      }
      // An earlier incarnation ran it: whatever is left of it dies before any re-run.
      killed += static_cast<size_t>(kill_leftovers(at.cgroup, at.pgid, at.start_ticks));
      mark_lost(rec, "runtime crash: incarnation " + std::to_string(at.id.incarnation)
                       + " of the runtime stopped while this attempt ran");
      ++lost;
      changed.push_back(rec);
    }
    if (rec.state == job_state::queued)
      st.queued.insert({rec.submit_seq, rec.id});
    st.jobs[rec.id] = std::move(rec);
  }
  // With cgroups, whatever an earlier incarnation left in this node's cgroups dies too,
  // journaled or not (a crash between spawn and its commit leaves no pid behind).
  if (!st.cfg.cgroup_base.empty()) {
    std::set<std::string> keep;
    for (auto& [id, run] : st.running)
      keep.insert(st.jobs[id].attempts.back().cgroup);
    auto dir = st.cfg.cgroup_base + "/monkey-" + st.cfg.node.str();
    if (auto* d = ::opendir(dir.c_str())) {
      while (auto* e = ::readdir(d)) {
        std::string name = e->d_name;
        if (name == "." || name == ".." || e->d_type != DT_DIR)
          continue;
        auto path = dir + "/" + name;
        if (keep.count(path))
          continue;
        killed += static_cast<size_t>(kill_leftovers(path, 0, 0));
      }
      ::closedir(d);
    }
  }
  st.log->info("recovered {} jobs from the journal: {} lost attempts requeued or ended, {} "
               "leftover processes killed, {} running attempts re-adopted; {} replicas of "
               "other owners' jobs; {} jobs wait to hear from their other holders",
               st.jobs.size(), lost, killed, readopted, held, unsynced);
  st.synced = st.unsynced.empty();
  if (!changed.empty())
    persist(self, std::move(changed), [=] { request_schedule(self); });
  else
    request_schedule(self);
}

void compact(coordinator_actor* self) {
  auto& st = self->state;
  auto cutoff = now_ms() - st.cfg.retention_ms;
  // Keep records that unfinished jobs still depend on (a running job may be queued again
  // by a retry, and then checks its dependencies again), in memory and in the journal.
  std::set<job_id> needed;
  for (auto& [id, rec] : st.jobs)
    if (!is_final(rec.state))
      for (auto& d : rec.spec.after)
        needed.insert(d.job);
  for (auto it = st.jobs.begin(); it != st.jobs.end();) {
    if (is_final(it->second.state) && it->second.updated_ms < cutoff && !needed.count(it->first))
      it = st.jobs.erase(it);
    else
      ++it;
  }
  st.tasks.forget_finished(cutoff);
  self->request(st.journal, caf::infinite, atoms::compact::value, cutoff,
                id_list(needed.begin(), needed.end()))
    .then([](size_t) {}, [=](const caf::error& err) {
      self->state.log->warn("compaction failed: {}", describe(err));
    });
}


// ---- cluster: membership, adoption, sync, re-replication --------------------------------

/// The holders a record should have now: its alive holders (this node first), then other
/// alive members by rank until there are R.
std::vector<std::string> refreshed_holders(const coordinator_state& st, const job_record& rec) {
  std::vector<std::string> out{self_node(st)};
  for (auto& n : rec.replicas)
    if (n != self_node(st) && is_alive(st, n))
      out.push_back(n);
  std::vector<std::string> others;
  for (auto& n : alive_nodes(st))
    if (std::find(out.begin(), out.end(), n) == out.end())
      others.push_back(n);
  for (auto& n : rendezvous_rank(rec.id.str(), others))
    if (out.size() < st.cfg.replicas)
      out.push_back(n);
  return out;
}

// ---- placement across nodes: reservations ------------------------------------------------

/// A queued job waits at least this long here before it is offered to another node.
constexpr int64_t offer_after_ms = 1000;
/// How long an unanswered offer keeps the job from being started or offered again (the
/// other node may have taken it: its record then arrives by replication or anti-entropy).
constexpr int64_t offer_unanswered_ms = 10'000;
constexpr size_t offers_per_round = 4;
/// Reservation requests arriving within this window are judged together.
constexpr auto reservation_window = std::chrono::milliseconds(50);

/// The other node's answer to "run this job now": it is the only authority over its slots.
/// It grants only if its own placement (strict priority, FCFS, backfill, its own queue
/// included) would start the job now; it then owns the job (a new ownership term,
/// replicated before the answer) and starts it. Otherwise it refuses, saying why.
void on_reserve(coordinator_actor* self, caf::response_promise rp, replicate_request req) {
  auto& st = self->state;
  if (req.records.size() != 1)
    return rp.deliver(make_error(errc::bad_request, "peer reserve: one record expected"));
  auto rec = std::move(req.records.front());
  auto refuse = [&](const std::string& why) {
    rp.deliver(reply(text_reply{"refused: " + why}));
  };
  if (!st.accepting || st.leaving || !st.majority || !st.synced)
    return refuse("this node accepts no work now");
  if (rec.state != job_state::queued || !rec.spec.after.empty())
    return refuse("only queued jobs without dependencies are placed elsewhere");
  if (local_version(st, rec.id) > rec.version || st.running.count(rec.id))
    return refuse("this node has a newer record of the job");
  if (auto never = never_fits(st.cfg.total, need_of(rec.spec)); !never.empty())
    return refuse(never);
  // Requests arriving within a short window are judged together, by priority across
  // owners and against this node's own queue (grant_reservations).
  st.reservations.push_back({rp, std::move(rec)});
  if (st.reservations.size() == 1)
    self->delayed_send(self, reservation_window, atoms::reserve_round::value);
}

/// Judges the reservation requests gathered in the window: grants those that this node's
/// placement starts now (an ownership handoff in a new term, replicated before the
/// answer), refuses the others.
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
    q.timeout_s = p.rec.spec.timeout_s;
    asks.push_back(q);
  }
  auto granted = (!st.accepting || st.leaving || !st.majority)
                   ? std::vector<job_id>{}
                   : grant_reservations(st.cfg.total, placement_running(st),
                                        placement_queue(st, nullptr), asks, now_ms());
  for (auto& p : pending) {
    auto rp = p.rp;
    if (std::find(granted.begin(), granted.end(), p.rec.id) == granted.end()) {
      rp.deliver(reply(text_reply{"refused: no free slots for it now ("
                                  + std::to_string(pending.size())
                                  + " requests judged by priority with this node's queue)"}));
      continue;
    }
    auto rec = p.rec;
    auto from = rec.owner.str();
    rec.owner = st.cfg.node;
    rec.version = next_term(rec.version);
    rec.submit_seq = ++st.next_seq;
    touch(rec, job_state::queued,
          "placed on " + self_node(st) + " by a reservation from " + from);
    std::vector<std::string> holders{self_node(st)};
    if (is_alive(st, from))
      holders.push_back(from);
    rec.replicas = holders;
    rec.replicas = refreshed_holders(st, rec);
    take_over(self, rec);
    persist(self, {rec}, [=]() mutable {
      rp.deliver(reply(text_reply{"granted"}));
      request_schedule(self);
    });
  }
}

/// Offers queued jobs that cannot start here to other nodes, one candidate at a time
/// (rendezvous order among the alive members whose size fits the job), a few per round.
void offer_queued(coordinator_actor* self) {
  auto& st = self->state;
  auto now = now_ms();
  size_t expired = 0;
  for (auto it = st.offered.begin(); it != st.offered.end();) {
    if (it->second <= now) {
      it = st.offered.erase(it);
      ++expired;
    } else {
      ++it;
    }
  }
  if (expired > 0)
    request_schedule(self); // an unanswered offer no longer holds those jobs back
  if (!st.accepting || st.leaving || !st.majority || !st.membership || st.queued.empty())
    return;
  auto plan = plan_placement(st.cfg.total, placement_running(st), placement_queue(st, nullptr),
                             now, false);
  size_t sent = 0;
  for (auto& [seq, id] : st.queued) {
    if (sent >= offers_per_round)
      break;
    auto& rec = st.jobs[id];
    if (st.offered.count(id) || !rec.spec.after.empty() || now - rec.updated_ms < offer_after_ms
        || std::find(plan.start.begin(), plan.start.end(), id) != plan.start.end())
      continue;
    auto need = need_of(rec.spec);
    std::vector<std::string> fit;
    for (auto& m : st.members)
      if (m.node != self_node(st) && m.state == member_state::alive && m.cpus >= need.cpus
          && m.gpus >= need.gpus)
        fit.push_back(m.node);
    auto& refused = st.refused_by[id];
    std::string target;
    for (auto& n : rendezvous_rank(id.str(), fit))
      if (!refused.count(n)) {
        target = n;
        break;
      }
    if (target.empty()) {
      refused.clear(); // every candidate said no: a new round later
      continue;
    }
    st.offered[id] = now + offer_unanswered_ms;
    ++sent;
    replicate_request req{self_node(st), {rec}};
    ask_node(self, target, verb::peer_reserve, encode(req), std::chrono::seconds(3))
      .then(
        [=](const std::string& body) {
          auto& st = self->state;
          auto r = decode<text_reply>(body, "reserve");
          if (r && r->text == "granted") {
            st.refused_by.erase(id);
            st.log->info("job {} placed on {} by reservation", id.short_str(), target);
            return; // its record (owner: the target) arrives by replication
          }
          SPDLOG_LOGGER_DEBUG(st.log, "job {}: {} {}", id.short_str(), target,
                              r ? r->text : r.error());
          st.refused_by[id].insert(target);
          st.offered.erase(id);
          request_schedule(self); // it may start here after all
        },
        [=](const caf::error& err) {
          // Unanswered: the target may have taken the job. Nothing starts or offers it
          // here until offer_unanswered_ms has passed; by then its record has arrived if so.
          self->state.log->warn("reservation request for job {} to {}: {}", id.short_str(),
                                target, describe(err));
        });
  }
}

// ---- drain: a planned leave that hands the jobs over ----------------------------------

/// Hands the queued (not running, not final) jobs among `ids` to new owners: the successor
/// by rendezvous among their other alive holders (else among all other alive members), in
/// a new ownership term; the record goes to its new holders (this node drops out of
/// them) and this node keeps a replica until it leaves. Returns how many it handed over.
size_t hand_over(coordinator_actor* self, const std::vector<job_id>& ids) {
  auto& st = self->state;
  record_list out;
  for (auto& id : ids) {
    auto it = st.jobs.find(id);
    if (it == st.jobs.end() || st.running.count(id) || is_final(it->second.state))
      continue;
    auto rec = it->second;
    std::vector<std::string> candidates;
    for (auto& n : rec.replicas)
      if (n != self_node(st) && is_alive(st, n))
        candidates.push_back(n);
    if (candidates.empty())
      for (auto& n : alive_nodes(st))
        if (n != self_node(st))
          candidates.push_back(n);
    if (candidates.empty())
      continue; // alone: nobody to hand it to
    auto heir = successor(id.str(), candidates);
    auto heir_id = node_id::parse(heir);
    if (!heir_id)
      continue;
    rec.owner = *heir_id;
    rec.version = next_term(rec.version);
    touch(rec, rec.state, rec.reason + (rec.reason.empty() ? "" : "; ") + "handed over by "
                            + self_node(st) + " (draining) to " + heir);
    std::vector<std::string> holders{heir};
    for (auto& n : rec.replicas)
      if (n != self_node(st) && n != heir && is_alive(st, n) && holders.size() < st.cfg.replicas)
        holders.push_back(n);
    std::vector<std::string> others;
    for (auto& n : alive_nodes(st))
      if (n != self_node(st) && std::find(holders.begin(), holders.end(), n) == holders.end())
        others.push_back(n);
    for (auto& n : rendezvous_rank(id.str(), others))
      if (holders.size() < st.cfg.replicas)
        holders.push_back(n);
    holders.push_back(self_node(st)); // a copy stays here until the node is gone
    rec.replicas = holders;
    st.queued.erase({it->second.submit_seq, id});
    st.jobs.erase(it);
    st.held[id] = rec;
    out.push_back(rec);
  }
  if (!out.empty()) {
    st.log->info("draining: handing {} jobs over to other members", out.size());
    persist(self, out, [] {});
  }
  return out.size();
}

/// While draining: once no attempt runs here, the rest is handed over and the node leaves
/// through the same path as SIGTERM (announced, not taken for a failure).
void check_drained(coordinator_actor* self) {
  auto& st = self->state;
  if (!st.leaving || st.leave_signalled)
    return;
  std::vector<job_id> ids;
  for (auto& [id, rec] : st.jobs)
    ids.push_back(id);
  hand_over(self, ids); // e.g. a failed attempt requeued for a retry
  if (!st.running.empty())
    return;
  st.leave_signalled = true;
  st.log->warn("drained: no attempt runs here any more and the jobs are handed over; leaving");
  // Give the hand-over's replication a moment, then leave as on SIGTERM.
  self->delayed_send(self, std::chrono::seconds(1), atoms::shutdown::value, std::string("drain"));
}

void on_drain(coordinator_actor* self, caf::response_promise rp, const id_request& req) {
  auto& st = self->state;
  // NODE: a node id (or a unique prefix of one) or an address.
  std::vector<const member*> hits;
  for (auto& m : st.members)
    if (m.node == req.id || m.address == req.id
        || (req.id.size() >= 4 && m.node.compare(0, req.id.size(), req.id) == 0))
      hits.push_back(&m);
  if (hits.empty() && (req.id == self_node(st) || req.id == st.cfg.address))
    hits.push_back(nullptr);
  if (hits.size() > 1)
    return rp.deliver(make_error(errc::bad_request, "drain: '" + req.id + "' names "
                                                      + std::to_string(hits.size()) + " nodes"));
  if (hits.empty())
    return rp.deliver(make_error(errc::not_found, "drain: no node '" + req.id
                                                    + "' in the cluster (see monkey nodes)"));
  auto target = hits.front() ? hits.front()->node : self_node(st);
  if (target != self_node(st)) {
    if (req.local)
      return rp.deliver(make_error(errc::not_found, "drain: this node is not " + req.id));
    if (!is_alive(st, target))
      return rp.deliver(make_error(errc::refused, "drain: node " + target + " is not alive"));
    auto fwd = req;
    fwd.id = target;
    fwd.local = true;
    ask_node(self, target, verb::drain, encode(fwd), std::chrono::seconds(10))
      .then([=](std::string& body) mutable { rp.deliver(std::move(body)); },
            [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
    return;
  }
  if (alive_nodes(st).size() <= 1)
    return rp.deliver(make_error(errc::refused, "drain: this node is the only one alive; "
                                                "there is nobody to hand its jobs to"));
  if (!st.leaving) {
    st.leaving = true;
    st.accepting = false;
    st.draining = false;
  }
  std::vector<job_id> ids;
  for (auto& [id, rec] : st.jobs)
    ids.push_back(id);
  auto handed = hand_over(self, ids);
  auto running = st.running.size();
  check_drained(self);
  rp.deliver(reply(text_reply{
    "draining node " + self_node(st) + ": " + std::to_string(handed)
    + " queued jobs handed over; " + std::to_string(running)
    + " running attempts finish here; it leaves the cluster when they are done"}));
}

/// This node becomes the owner of a held record whose owner died (the same rendezvous
/// choice every surviving holder makes). The handoff is a replicated transition.
void adopt(coordinator_actor* self, job_record rec, const std::string& why) {
  auto& st = self->state;
  auto old_owner = rec.owner.str();
  rec.owner = st.cfg.node;
  // A new ownership term: every later version of the adopter beats every version the old
  // owner may still write while cut off (see replicate_reply).
  rec.version = next_term(rec.version);
  if (rec.state == job_state::running && !rec.attempts.empty()) {
    mark_lost(rec, "owner " + old_owner + " " + why + " while attempt "
                     + std::to_string(rec.attempts.back().number) + " ran; adopted by "
                     + self_node(st));
  } else {
    touch(rec, rec.state, rec.reason + "; adopted by " + self_node(st) + " (owner " + old_owner
                            + " " + why + ")");
  }
  rec.replicas = refreshed_holders(st, rec);
  st.log->info("adopted job {} from owner {} ({}): now {}", rec.id.short_str(), old_owner, why,
               to_string(rec.state));
  st.held.erase(rec.id);
  st.next_seq = std::max(st.next_seq, rec.submit_seq);
  if (rec.state == job_state::queued)
    st.queued.insert({rec.submit_seq, rec.id});
  if (!rec.client_key.empty())
    st.by_key[rec.client_key].push_back(rec.id);
  st.jobs[rec.id] = rec;
  persist(self, {rec}, [=] { request_schedule(self); });
}

/// Before adopting, the copies of every other alive member are read: this node's copy may
/// be stale (a holder dropped by re-replication while it was down keeps an old copy). The
/// newest copy decides: final, or owned by someone alive, means nothing to adopt; else
/// the successor by that copy's holders adopts it.
void adopt_checked(coordinator_actor* self, const job_id& id, const std::string& why) {
  auto& st = self->state;
  if (st.adopting.count(id))
    return;
  st.adopting.insert(id);
  std::vector<std::string> others;
  for (auto& n : alive_nodes(st))
    if (n != self_node(st))
      others.push_back(n);
  auto newest = std::make_shared<job_record>(st.held[id]);
  auto pending = std::make_shared<size_t>(others.size());
  auto decide = [=]() {
    auto& st = self->state;
    st.adopting.erase(id);
    auto h = st.held.find(id);
    if (h == st.held.end())
      return; // settled meanwhile (e.g. the new owner replicated it here)
    if (newest->version > h->second.version) {
      h->second = *newest;
      write_batch batch;
      batch.records.push_back(*newest);
      self->request(st.journal, caf::infinite, atoms::write::value, std::move(batch))
        .then([](bool) {}, [](const caf::error&) {});
    }
    auto& rec = h->second;
    if (is_final(rec.state))
      return;
    auto owner = rec.owner.str();
    auto* m = find_member(st, owner);
    if (owner == self_node(st) || (m && m->state != member_state::dead
                                   && m->state != member_state::left))
      return; // someone alive owns it
    std::vector<std::string> surviving;
    for (auto& n : rec.replicas)
      if (is_alive(st, n))
        surviving.push_back(n);
    if (successor(rec.id.str(), surviving) == self_node(st))
      adopt(self, rec, why);
  };
  if (others.empty())
    return decide();
  for (auto& n : others)
    ask_node(self, n, verb::show, encode(id_request{id.str(), true}), std::chrono::seconds(5))
      .then(
        [=](const std::string& body) {
          if (auto r = decode<show_reply>(body, "show"))
            if (r->record.version > newest->version)
              *newest = r->record;
          if (--*pending == 0)
            decide();
        },
        [=](const caf::error&) {
          if (--*pending == 0)
            decide();
        });
}

/// An own record whose holders were asked: kept (and now recovered) or given up.
void finish_sync(coordinator_actor* self, const job_id& id,
                 const std::optional<job_record>& newer) {
  auto& st = self->state;
  auto it = st.unsynced.find(id);
  if (it == st.unsynced.end())
    return;
  auto rec = std::move(it->second);
  st.unsynced.erase(it);
  if (newer && newer->owner == st.cfg.node && newer->version > rec.version) {
    // A holder has this node's own later transitions (a final state goes to the holders
    // before the local journal): take them.
    rec = *newer;
    write_batch batch;
    batch.records.push_back(rec);
    self->request(st.journal, caf::infinite, atoms::write::value, std::move(batch))
      .then([](bool) {}, [](const caf::error&) {});
  }
  if (newer && newer->owner != st.cfg.node) { // adopted: the adopter is the owner now
    superseded(self, *newer, "was away");
  } else if (is_final(rec.state)) {
    st.jobs[id] = rec;
    persist(self, {rec}, [] {}); // makes sure every holder has the final record
  } else {
    if (rec.state == job_state::running && !rec.attempts.empty())
      mark_lost(rec, "runtime crash: incarnation "
                       + std::to_string(rec.attempts.back().id.incarnation)
                       + " of the runtime stopped while this attempt ran");
    else
      touch(rec, rec.state, rec.reason);
    rec.replicas = refreshed_holders(st, rec);
    if (rec.state == job_state::queued)
      st.queued.insert({rec.submit_seq, id});
    st.jobs[id] = rec;
    persist(self, {rec}, [=] { request_schedule(self); });
  }
  if (st.unsynced.empty() && !st.synced) {
    st.synced = true;
    st.log->info("every recovered job heard from its other holders");
  }
}

/// Asks the alive holders of each unsynced record for their copy. With none alive, waits
/// until the sync deadline (they may still be joining), then keeps the record.
void try_sync(coordinator_actor* self, bool deadline_passed) {
  auto& st = self->state;
  std::vector<job_id> ids;
  for (auto& [id, rec] : st.unsynced)
    ids.push_back(id);
  for (auto& id : ids) {
    auto& rec = st.unsynced[id];
    if (rec.version == UINT64_MAX)
      continue; // being asked
    std::vector<std::string> alive;
    for (auto& n : rec.replicas)
      if (n != self_node(st) && is_alive(st, n))
        alive.push_back(n);
    if (alive.empty()) {
      if (deadline_passed)
        finish_sync(self, id, std::nullopt);
      continue;
    }
    auto version = rec.version;
    rec.version = UINT64_MAX; // marks "being asked"; restored below
    auto pending = std::make_shared<size_t>(alive.size());
    auto newest = std::make_shared<std::optional<job_record>>();
    for (auto& n : alive)
      ask_node(self, n, verb::show, encode(id_request{id.str(), true}), std::chrono::seconds(5))
        .then(
          [=](const std::string& body) {
            if (auto r = decode<show_reply>(body, "show"))
              if (!*newest || (*newest)->version < r->record.version)
                *newest = r->record;
            if (--*pending == 0) {
              self->state.unsynced[id].version = version;
              finish_sync(self, id, *newest);
            }
          },
          [=](const caf::error&) {
            if (--*pending == 0) {
              self->state.unsynced[id].version = version;
              finish_sync(self, id, *newest);
            }
          });
  }
}

/// What changes when the membership changes: adoption of the jobs of dead owners,
/// re-replication of own jobs that lost holders, the sync of recovered jobs.
void on_members(coordinator_actor* self) {
  auto& st = self->state;
  if (!st.synced)
    try_sync(self, false);
  if (!st.majority)
    return; // a minority neither adopts nor moves records: the majority side does
  // Adoption.
  std::vector<job_record> adopt_now;
  for (auto& [id, rec] : st.held) {
    if (is_final(rec.state))
      continue;
    auto* owner = find_member(st, rec.owner.str());
    if (!owner || (owner->state != member_state::dead && owner->state != member_state::left))
      continue;
    std::vector<std::string> surviving;
    for (auto& n : rec.replicas)
      if (is_alive(st, n))
        surviving.push_back(n);
    if (successor(rec.id.str(), surviving) == self_node(st))
      adopt_now.push_back(rec);
  }
  for (auto& rec : adopt_now) {
    auto* owner = find_member(st, rec.owner.str());
    adopt_checked(self, rec.id, owner && owner->state == member_state::left ? "left" : "died");
  }
  // Re-replication of own unfinished jobs whose holders are not all alive.
  record_list refresh;
  for (auto& [id, rec] : st.jobs) {
    if (is_final(rec.state))
      continue;
    auto want = refreshed_holders(st, rec);
    if (want != rec.replicas) {
      rec.replicas = want;
      rec.version += 1;
      refresh.push_back(rec);
    }
  }
  if (!refresh.empty()) {
    st.log->info("re-replicating {} jobs to restore {} holders each", refresh.size(),
                 st.cfg.replicas);
    persist(self, std::move(refresh), [] {});
  }
}

/// How long attempt outcomes wait after this process was paused (SIGSTOP, swap): long
/// enough for the others' death verdict, if any, to arrive and fence the jobs first.
constexpr int64_t hold_after_pause_ms = 4000;

/// One anti-entropy page every 5 ticks (1 s), each with the next peer in turn.
constexpr uint64_t anti_entropy_every_ticks = 5;

/// True (and the current message kept for later) while outcomes are on hold: this
/// process was just paused, and the others may have declared it dead and adopted its jobs.
/// An outcome recorded now would be a second final state next to the adopter's.
bool hold(coordinator_actor* self) {
  auto& st = self->state;
  auto now = now_ms();
  if (st.last_tick_ms != 0 && now - st.last_tick_ms > 1200) { // the tick itself is late
    st.hold_until = std::max(st.hold_until, now + hold_after_pause_ms);
    st.last_tick_ms = now;
  }
  // (A node shutting down has left the member list, and so sees no majority: its last
  // outcomes are written as a clean stop requires.)
  if (now >= st.hold_until && (st.majority || !st.accepting))
    return false;
  // Paused, or cut off from the majority: the others may adopt this job meanwhile, so its
  // outcome waits (and is voided by fencing if they did).
  st.on_hold.push_back(self->current_mailbox_element()->copy_content_to_message());
  return true;
}

/// This node was declared dead and its jobs adopted by the surviving holders: every job
/// process it runs is killed now, and its unfinished jobs wait to hear from their holders
/// (as after a restart) before anything of them runs again here.
size_t fence_jobs(coordinator_actor* self) {
  auto& st = self->state;
  size_t killed = 0;
  for (auto& [id, run] : st.running) {
    auto& rec = st.jobs[id];
    if (!rec.attempts.empty()) {
      auto& at = rec.attempts.back();
      killed += static_cast<size_t>(signal_job(at.cgroup, at.pgid, SIGKILL));
      if (!at.cgroup.empty())
        st.launch->retire_cgroup(at.cgroup);
    }
    for (int g : run.gpus)
      st.free_gpus.insert(g);
    if (run.worker) {
      self->unlink_from(run.worker);
      caf::anon_send_exit(run.worker, caf::exit_reason::user_shutdown);
    }
  }
  st.running.clear();
  st.on_hold.clear(); // outcomes of attempts that were adopted elsewhere: void
  // Unfinished jobs, and jobs that finished in the last minute: their final record may not
  // have reached the holders before the pause, and a holder may have adopted them since.
  std::vector<job_id> own;
  auto recent = now_ms() - 60'000;
  for (auto& [id, rec] : st.jobs)
    if (!is_final(rec.state) || (rec.updated_ms > recent && rec.replicas.size() > 1))
      own.push_back(id);
  for (auto& id : own) {
    auto rec = std::move(st.jobs[id]);
    st.jobs.erase(id);
    st.queued.erase({rec.submit_seq, id});
    st.unsynced[id] = std::move(rec);
  }
  st.synced = st.unsynced.empty();
  st.log->warn("fenced: killed {} job processes; {} unfinished jobs wait to hear from their "
               "holders",
               killed, own.size());
  self->delayed_send(self, std::chrono::seconds(5), atoms::sync::value);
  return own.size();
}

void subscribe_members(coordinator_actor* self) {
  auto& st = self->state;
  auto m = caf::actor_cast<caf::actor>(
    self->system().registry().get(caf::atom_from_string(membership_name)));
  if (!m) { // it starts after the coordinator
    self->delayed_send(self, std::chrono::milliseconds(100), atoms::subscribe::value);
    return;
  }
  st.membership = m;
  self->monitor(m);
  self->send(m, atoms::subscribe::value);
}

caf::behavior coordinator_impl(coordinator_actor* self, coordinator_config cfg,
                               caf::actor journal, caf::actor devices,
                               std::shared_ptr<launcher> launch) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.journal = std::move(journal);
  st.devices = std::move(devices);
  st.launch = std::move(launch);
  st.log = logger("coordinator");
  for (int g : st.cfg.gpu_indices)
    st.free_gpus.insert(g);
  // Nothing else is handled until the journal has been read back.
  self->request(st.journal, caf::infinite, atoms::load::value)
    .await([=](record_list& recs) { recover(self, recs); },
           [=](const caf::error& err) {
             self->state.log->critical("cannot recover from the journal: {}", describe(err));
             self->quit(err);
           });
  self->request(st.journal, caf::infinite, atoms::load_tasks::value)
    .await(
      [=](task_state_list& batches) {
        auto& st = self->state;
        size_t open = 0;
        for (auto& b : batches) {
          st.tasks.add(b.batch, b.done);
          open += st.tasks.complete(b.batch.id) ? 0 : 1;
        }
        if (open > 0)
          st.log->info("recovered {} task batches, {} with tasks still to run ({} tasks)",
                       batches.size(), open, st.tasks.queued_tasks());
        for (auto& d : st.cfg.devices)
          discover_proxy(self, d.name);
        subscribe_members(self);
        if (!st.synced) // with no holder alive by then, recovered jobs are kept and run
          self->delayed_send(self, std::chrono::seconds(5), atoms::sync::value);
      },
      [=](const caf::error& err) {
        self->state.log->critical("cannot recover the task batches: {}", describe(err));
        self->quit(err);
      });
  self->set_down_handler([=](const caf::down_msg& dm) {
    auto& st = self->state;
    if (st.membership && st.membership.address() == dm.source) {
      st.membership = nullptr; // restarted by the node supervisor: subscribe again
      self->delayed_send(self, std::chrono::milliseconds(100), atoms::subscribe::value);
      return;
    }
    for (auto it = st.proxies.begin(); it != st.proxies.end(); ++it) {
      if (it->handle.address() != dm.source)
        continue;
      auto name = it->name;
      for (auto seq : it->chunks)
        st.tasks.requeue(seq);
      st.log->warn("device proxy {} went down ({}); {} chunks go back to the queue", name,
                   caf::to_string(dm.reason), it->chunks.size());
      st.proxies.erase(it);
      self->delayed_send(self, std::chrono::milliseconds(50), atoms::discover::value, name);
      pump_tasks(self);
      return;
    }
  });
  self->set_exit_handler([=](const caf::exit_msg& em) {
    auto& st = self->state;
    for (auto& [id, run] : st.running) {
      if (!run.worker || run.worker.address() != em.source)
        continue;
      if (em.reason == caf::exit_reason::normal)
        return; // finished; its done message is on the way or applied
      auto& rec = st.jobs[id];
      auto& at = rec.attempts.back();
      st.log->warn("worker of job {} attempt {} died ({}); restarting it to re-adopt pid {}",
                   id.short_str(), at.number, caf::to_string(em.reason), at.pid);
      auto args = worker_args_for(st, rec, at);
      args.adopt = true;
      args.adopt_pid = at.pid;
      args.pgid = at.pgid;
      args.cgroup_dir = at.cgroup;
      run.worker = nullptr;
      run.restarts += 1;
      spawn_worker_for(self, id, args);
      return;
    }
    // Not a worker: our supervisor (or a link) stops us.
    if (em.reason != caf::exit_reason::normal)
      self->quit(em.reason);
  });
  auto retention_tick = std::chrono::milliseconds(
    std::clamp<int64_t>(st.cfg.retention_ms / 10, 1000, 3600 * 1000));
  self->delayed_send(self, retention_tick, atoms::compact::value);
  self->send(self, atoms::tick::value);
  return {
    [=](const envelope& env) { on_envelope(self, env); },
    [=](atoms::schedule) { schedule(self); },
    [=](atoms::task_done, const chunk_result& r) { on_task_done(self, r); },
    [=](atoms::task_flush) { flush_task_finals(self); },
    [=](atoms::task_wait, const job_id& id, uint64_t seq) { on_task_wait_timeout(self, id, seq); },
    [=](atoms::discover, const std::string& name) { discover_proxy(self, name); },
    [=](atoms::subscribe) { subscribe_members(self); },
    [=](atoms::members, member_list& ms, bool majority) {
      auto& st = self->state;
      st.members = std::move(ms);
      st.have_members = true;
      if (majority != st.majority)
        st.log->warn(majority ? "this node sees a majority of the cluster again: it starts "
                                "attempts and accepts submissions"
                              : "this node cannot see a majority of the cluster: it starts no "
                                "new attempts and refuses submissions (running ones go on)");
      st.majority = majority;
      if (majority)
        request_schedule(self);
      on_members(self);
    },
    [=](atoms::sync) {
      if (!self->state.synced)
        try_sync(self, true);
    },
    [=](atoms::fence) {
      fence_jobs(self);
      return true;
    },
    [=](atoms::address, const std::string& addr) { self->state.cfg.address = addr; },
    [=](atoms::tree) {
      auto& st = self->state;
      tree_node me;
      me.name = "coordinator";
      me.kind = "coordinator";
      me.id = self->id();
      me.state = "running";
      for (auto& [id, run] : st.running) {
        tree_node w;
        w.name = "worker-" + id.short_str() + "-" + std::to_string(run.attempt);
        w.kind = "worker";
        w.id = run.worker ? run.worker.id() : 0;
        w.restarts = run.restarts;
        w.state = run.worker ? "running" : "starting";
        me.children.push_back(std::move(w));
      }
      return encode(me);
    },
    [=](atoms::kill, const std::string& name) -> caf::result<std::string> {
      for (auto& [id, run] : self->state.running) {
        if ("worker-" + id.short_str() + "-" + std::to_string(run.attempt) != name)
          continue;
        if (!run.worker)
          return make_error(errc::conflict, name + " is starting; try again");
        // Anonymously: an exit from the coordinator itself would first unlink the worker,
        // and its death would then never reach the exit handler that restarts it. Not with
        // exit_reason::kill either: CAF makes that reason fatal for linked actors too.
        caf::anon_send_exit(run.worker, caf::exit_reason::user_shutdown);
        return "killed " + name + "; the coordinator restarts it and it re-adopts pid "
               + std::to_string(self->state.jobs[id].attempts.back().pid);
      }
      return make_error(errc::not_found, "no worker '" + name + "'");
    },
    [=](atoms::reserve_round) { reserve_round(self); },
    [=](atoms::tick) {
      auto& st = self->state;
      auto now = now_ms();
      if (st.last_tick_ms != 0 && now - st.last_tick_ms > 1200)
        st.hold_until = now + hold_after_pause_ms;
      st.last_tick_ms = now;
      if (++st.ae_ticks % anti_entropy_every_ticks == 0) {
        anti_entropy_step(self);
        offer_queued(self);
      }
      if (!st.on_hold.empty() && now >= st.hold_until && (st.majority || !st.accepting)) {
        auto msgs = std::move(st.on_hold);
        st.on_hold.clear();
        for (auto& m : msgs)
          self->send(self, m);
      }
      self->delayed_send(self, std::chrono::milliseconds(200), atoms::tick::value);
    },
    [=](atoms::started, const job_id& id, int32_t number, const launch_result& res) {
      if (hold(self))
        return;
      auto& st = self->state;
      auto it = st.jobs.find(id);
      if (it == st.jobs.end() || it->second.attempts.empty()
          || it->second.attempts.back().number != number)
        return;
      auto& at = it->second.attempts.back();
      at.pid = res.pid;
      at.pgid = res.pgid;
      at.start_ticks = res.start_ticks;
      at.cgroup = res.cgroup_dir;
      it->second.version += 1;
      it->second.updated_ms = now_ms();
      persist(self, {it->second}, [] {});
    },
    [=](atoms::done, const job_id& id, int32_t number, const attempt_result& res) {
      if (hold(self))
        return;
      if (!finish_attempt(self, id, number, res))
        return;
      auto rec = self->state.jobs[id];
      // Its slots are free now: place the next job without waiting for the commit. A
      // shutdown waits for it, so that no final state is lost at a clean stop.
      request_schedule(self);
      if (is_final(rec.state))
        persist_final(self, rec, [=] { maybe_finish_shutdown(self); });
      else
        persist(self, {rec}, [=] { maybe_finish_shutdown(self); });
      check_drained(self);
    },
    // `monkey drain` is done here: leave through the runtime's SIGTERM path (the leave is
    // announced to the members; nothing runs here any more).
    [=](atoms::shutdown, const std::string&) { ::kill(::getpid(), SIGTERM); },
    [=](atoms::shutdown, bool drain) {
      auto& st = self->state;
      auto rp = self->make_response_promise();
      st.shutdown_waiters.push_back(rp);
      st.accepting = false;
      st.draining = drain;
      if (!drain)
        for (auto& [id, run] : st.running) {
          if (run.worker)
            self->send(run.worker, atoms::stop::value, std::string("requeued"));
          else
            run.stop_pending = "requeued";
        }
      st.log->info("shutting down: {} running jobs {}", st.running.size(),
                   drain ? "will be waited for" : "are stopped and requeued");
      maybe_finish_shutdown(self);
    },
    [=](atoms::compact) {
      compact(self);
      self->delayed_send(self, retention_tick, atoms::compact::value);
    },
  };
}

} // namespace

caf::actor spawn_coordinator(caf::actor_system& sys, coordinator_config cfg, caf::actor journal,
                             caf::actor devices, std::shared_ptr<launcher> launch) {
  return sys.spawn(coordinator_impl, std::move(cfg), std::move(journal), std::move(devices),
                   std::move(launch));
}

} // namespace monkey
