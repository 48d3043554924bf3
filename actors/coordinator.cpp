// SPDX-License-Identifier: Apache-2.0
#include "actors/coordinator.hpp"

#include <algorithm>
#include <dirent.h>
#include <optional>
#include <fcntl.h>
#include <set>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_map>

#include <caf/all.hpp>

#include "runtime/atoms.hpp"
#include "actors/messages.hpp"
#include "actors/worker.hpp"
#include "runtime/envelope.hpp"
#include "runtime/errc.hpp"
#include "runtime/logging.hpp"
#include "runtime/messages/client.hpp"
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
  std::vector<caf::response_promise> shutdown_waiters;
  static inline const char* name = "coordinator";
};

using coordinator_actor = caf::stateful_actor<coordinator_state>;

template <class T>
std::string reply(const T& value) {
  return encode(value);
}

void request_schedule(coordinator_actor* self) {
  if (!self->state.schedule_queued) {
    self->state.schedule_queued = true;
    self->send(self, atoms::schedule::value);
  }
}

/// Makes `recs` durable, then runs `then` (or `on_error`).
template <class Then>
void persist(coordinator_actor* self, record_list recs, Then then,
             std::function<void(const caf::error&)> on_error = nullptr) {
  write_batch batch;
  batch.records = std::move(recs);
  self->request(self->state.journal, caf::infinite, atoms::write::value, std::move(batch))
    .then([=](bool) mutable { then(); },
          [=](const caf::error& err) {
            self->state.log->error("journal write failed: {}", describe(err));
            if (on_error)
              on_error(err);
          });
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
        if (!key.empty()) {
          for (auto& w : st.task_key_in_flight[key])
            w.deliver(body);
          st.task_key_in_flight.erase(key);
        }
        rp.deliver(body);
        pump_tasks(self);
      },
      [=](const caf::error& err) mutable {
        auto e = make_error(errc::journal_failure,
                            "the task batch could not be made durable: " + describe(err));
        if (!key.empty()) {
          for (auto& w : self->state.task_key_in_flight[key])
            w.deliver(e);
          self->state.task_key_in_flight.erase(key);
        }
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
  return s;
}

std::string why_text(coordinator_state& st, const job_record& rec) {
  switch (rec.state) {
    case job_state::queued:
      if (!st.accepting && !st.draining)
        return "the node is shutting down";
      return explain_wait(st, rec.id);
    case job_state::running:
      return "running attempt " + std::to_string(rec.attempts.back().number) + " (pid "
             + std::to_string(rec.attempts.back().pid) + ")";
    default:
      return std::string("finished: ") + to_string(rec.state) + " (" + rec.reason + ")";
  }
}

void on_submit(coordinator_actor* self, caf::response_promise rp, submit_request req) {
  auto& st = self->state;
  if (!st.accepting)
    return rp.deliver(make_error(errc::refused, "the node is shutting down and accepts no jobs"));
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
  if (!req.spec.has_seed) {
    random_bytes(&req.spec.seed, sizeof(req.spec.seed));
    req.spec.seed &= 0x7FFFFFFFFFFFFFFFull;
    req.spec.has_seed = true;
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
      if (!key.empty()) {
        st.by_key[key] = r.ids;
        for (auto& w : st.key_in_flight[key])
          w.deliver(body);
        st.key_in_flight.erase(key);
      }
      rp.deliver(body);
      request_schedule(self);
    },
    [=](const caf::error& err) mutable {
      auto e = make_error(errc::journal_failure,
                          "the job could not be made durable: " + describe(err));
      if (!key.empty()) {
        for (auto& w : self->state.key_in_flight[key])
          w.deliver(e);
        self->state.key_in_flight.erase(key);
      }
      rp.deliver(e);
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
      std::vector<const job_record*> sel;
      for (auto& [id, rec] : st.jobs)
        if (req->state.empty() || req->state == to_string(rec.state))
          sel.push_back(&rec);
      std::sort(sel.begin(), sel.end(), [](const job_record* a, const job_record* b) {
        return a->submit_seq != b->submit_seq ? a->submit_seq < b->submit_seq : a->id < b->id;
      });
      if (req->limit > 0 && sel.size() > req->limit)
        sel.erase(sel.begin(), sel.end() - req->limit);
      list_reply r;
      for (auto* rec : sel)
        r.jobs.push_back(summarize(*rec));
      return rp.deliver(reply(r));
    }
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

void recover(coordinator_actor* self, record_list& recs) {
  auto& st = self->state;
  record_list changed;
  size_t lost = 0, readopted = 0, killed = 0;
  for (auto& rec : recs) {
    st.next_seq = std::max(st.next_seq, rec.submit_seq);
    if (!rec.client_key.empty())
      st.by_key[rec.client_key].push_back(rec.id);
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
      at.outcome = "lost";
      at.cause = "runtime crash: incarnation " + std::to_string(at.id.incarnation)
                 + " of the runtime stopped while this attempt ran";
      at.ended_ms = now_ms();
      ++lost;
      if (rec.requeues_used < rec.spec.max_requeues) {
        rec.requeues_used += 1;
        touch(rec, job_state::queued,
              at.cause + "; requeue " + std::to_string(rec.requeues_used) + " of "
                + std::to_string(rec.spec.max_requeues) + " (retries not charged)");
      } else {
        touch(rec, job_state::lost, at.cause + "; no requeues left");
      }
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
               "leftover processes killed, {} running attempts re-adopted",
               st.jobs.size(), lost, killed, readopted);
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
      },
      [=](const caf::error& err) {
        self->state.log->critical("cannot recover the task batches: {}", describe(err));
        self->quit(err);
      });
  self->set_down_handler([=](const caf::down_msg& dm) {
    auto& st = self->state;
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
  return {
    [=](const envelope& env) { on_envelope(self, env); },
    [=](atoms::schedule) { schedule(self); },
    [=](atoms::task_done, const chunk_result& r) { on_task_done(self, r); },
    [=](atoms::task_flush) { flush_task_finals(self); },
    [=](atoms::task_wait, const job_id& id, uint64_t seq) { on_task_wait_timeout(self, id, seq); },
    [=](atoms::discover, const std::string& name) { discover_proxy(self, name); },
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
    [=](atoms::started, const job_id& id, int32_t number, const launch_result& res) {
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
      if (!finish_attempt(self, id, number, res))
        return;
      auto rec = self->state.jobs[id];
      // Its slots are free now: place the next job without waiting for the commit. A
      // shutdown waits for it, so that no final state is lost at a clean stop.
      request_schedule(self);
      persist(self, {rec}, [=] { maybe_finish_shutdown(self); });
    },
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
