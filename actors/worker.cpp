// SPDX-License-Identifier: Apache-2.0
#include "actors/worker.hpp"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <unistd.h>

#include <caf/all.hpp>

#include "runtime/wire/atoms.hpp"
#include "actors/checkpoints.hpp"
#include "actors/messages.hpp"
#include "actors/sweep/sweep_actor.hpp"
#include "runtime/errc.hpp"
#include "runtime/logging.hpp"
#include "runtime/process/proc.hpp"

namespace monkey {

namespace {

struct worker_state {
  worker_args args;
  caf::actor coordinator;
  caf::actor journal;
  std::shared_ptr<launcher> launch;
  std::shared_ptr<spdlog::logger> log;
  int pid = 0;
  int pgid = 0;
  std::string cgroup;
  caf::actor child;     ///< args.in_node: the sweep's optimizer actor
  abandon_flag abandoned = std::make_shared<std::atomic<bool>>(false); ///< for the child
  bool spawned = false; ///< the child runs (or ran)
  std::string lost;     ///< an optimizer actor that ended without an exit code: why
  bool exited = false;
  std::string stop_reason; ///< "", "timeout", "cancelled", "stopped", "requeued"
  bool killed = false;     ///< SIGKILL sent after the grace period
  uint64_t log_offset = 0;
  std::string partial_line;
  double tokens = 0;
  int64_t last_refill_ms = 0;
  uint64_t dropped_metrics = 0;
  std::map<std::string, int64_t> steps; ///< points so far per key (the default step)
  int64_t over_limit_kb = 0; ///< the memory watch killed it with this much resident
  int cgroup_mem = -1;       ///< the cgroup sets memory.max: 1, 0, or -1 not read yet
  int ticks = 0;
  // checkpoints (args.ckpt)
  int64_t ckpt_step = -1;     ///< the last MONKEY_CHECKPOINT step
  bool ckpt_busy = false;     ///< a save of the directory is under way
  int64_t ckpt_pending = -2;  ///< a save asked for meanwhile (its step; -2: none)
  std::string ckpt_sig;       ///< the directory as it was at the last save
  bool ckpt_ok = true;        ///< the last save of the directory succeeded (or none was due)
  bool finishing = false;     ///< the child exited: the outcome goes out after the last save
  attempt_result outcome;
  int64_t resumed_step = -1;
  std::string resumed_from;
  /// However the worker ends, an optimizer actor it started stops asking the cluster.
  ~worker_state() { *abandoned = true; }
  static inline const char* name = "worker";
};

using worker_actor = caf::stateful_actor<worker_state>;

void save_checkpoint(worker_actor* self, int64_t step);

// Reads new stdout bytes and forwards MONKEY_METRIC lines to the journal, rate-capped;
// MONKEY_CHECKPOINT lines save the checkpoint directory.
void scan_metrics(worker_actor* self) {
  auto& st = self->state;
  if (st.args.stdout_path.empty())
    return;
  int fd = ::open(st.args.stdout_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return;
  metric_batch points;
  char buf[65536];
  auto now = now_ms();
  auto rate = static_cast<double>(st.args.metric_rate);
  st.tokens = std::min(rate * 10, st.tokens + rate * static_cast<double>(now - st.last_refill_ms)
                                                / 1000.0);
  st.last_refill_ms = now;
  for (int rounds = 0; rounds < 64; ++rounds) {
    auto n = ::pread(fd, buf, sizeof(buf), static_cast<off_t>(st.log_offset));
    if (n <= 0)
      break;
    st.log_offset += static_cast<uint64_t>(n);
    st.partial_line.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    for (;;) {
      auto nl = st.partial_line.find('\n', start);
      if (nl == std::string::npos)
        break;
      std::string_view line(st.partial_line.data() + start, nl - start);
      std::vector<std::pair<std::string, double>> kv;
      int64_t ckpt_step = -1;
      if (st.args.ckpt.capture && parse_checkpoint_line(line, ckpt_step)) {
        st.ckpt_step = ckpt_step >= 0 ? ckpt_step : st.ckpt_step + 1;
        save_checkpoint(self, st.ckpt_step);
      } else if (parse_metric_line(line, kv)) {
        // `step=` and `rank=` name the line's points rather than being metrics.
        int64_t step = -1;
        int32_t rank = 0;
        for (auto& [k, v] : kv)
          if (k == "step")
            step = static_cast<int64_t>(v);
          else if (k == "rank")
            rank = static_cast<int32_t>(v);
        for (auto& [k, v] : kv) {
          if (k == "step" || k == "rank")
            continue;
          auto n = ++st.steps[k];
          if (st.tokens < 1) {
            ++st.dropped_metrics;
            continue;
          }
          st.tokens -= 1;
          points.push_back(
            metric_point{st.args.job, st.args.attempt, now, k, v, step >= 0 ? step : n, rank});
        }
      }
      start = nl + 1;
    }
    st.partial_line.erase(0, start);
    if (st.partial_line.size() > 65536) // a line that long is no metric line
      st.partial_line.clear();
  }
  ::close(fd);
  // Through the coordinator: it journals them and sends them on to the job's holders.
  if (!points.empty())
    self->send(st.coordinator, atoms::metric::value, std::move(points));
}

/// The plain files of the checkpoint directory as they are now (name, size, mtime): a
/// save at the attempt's end is needed only when this changed since the last one.
std::string dir_signature(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::string> entries;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    std::error_code e2;
    if (!it->is_regular_file(e2))
      continue;
    auto mtime = fs::last_write_time(it->path(), e2).time_since_epoch().count();
    entries.push_back(it->path().filename().string() + ":" + std::to_string(it->file_size(e2))
                      + ":" + std::to_string(mtime));
  }
  std::sort(entries.begin(), entries.end());
  std::string out;
  for (auto& e : entries)
    out += e + ";";
  return out;
}

caf::actor checkpoints_of(worker_actor* self) {
  return caf::actor_cast<caf::actor>(
    self->system().registry().get(caf::atom_from_string(checkpoints_name)));
}

void finish(worker_actor* self);

/// Saves the checkpoint directory as `step` (one save at a time; the newest asked for
/// meanwhile goes next). Its outcome is logged; a failed save does not stop the job.
void save_checkpoint(worker_actor* self, int64_t step) {
  auto& st = self->state;
  if (st.ckpt_busy) {
    st.ckpt_pending = step;
    return;
  }
  auto target = checkpoints_of(self);
  if (!target) {
    st.log->warn("job {} attempt {}: checkpoint step {} not saved: the node's checkpoints "
                 "actor is not running",
                 st.args.job.short_str(), st.args.attempt, step);
    return;
  }
  st.ckpt_busy = true;
  st.ckpt_sig = dir_signature(st.args.ckpt.dir);
  ckpt_save_args a;
  a.job = st.args.job;
  a.step = step;
  a.src = st.args.ckpt.dir;
  a.holders = st.args.ckpt.holders;
  a.label = "directory";
  auto next = [=] {
    auto& st = self->state;
    st.ckpt_busy = false;
    if (st.ckpt_pending >= -1) {
      auto p = st.ckpt_pending;
      st.ckpt_pending = -2;
      save_checkpoint(self, p);
    } else if (st.finishing) {
      finish(self);
    }
  };
  self->request(target, std::chrono::minutes(10), atoms::ckpt_save::value, std::move(a))
    .then(
      [=](ckpt_saved& saved) {
        self->state.ckpt_ok = true;
        next();
      },
          [=](caf::error& err) {
            auto& st = self->state;
            st.ckpt_ok = false;
            st.log->warn("job {} attempt {}: checkpoint step {} not saved: {}",
                         st.args.job.short_str(), st.args.attempt, step, describe(err));
            next();
          });
}

/// The child has exited: saves the checkpoint directory once more if it changed since the
/// last save and the child exited by itself (the attempt's end), then reports the outcome.
void finish(worker_actor* self) {
  auto& st = self->state;
  if (st.ckpt_busy)
    return; // called again when the save in flight ends
  // Only a child that exited by itself, unasked, left whole files: one stopped or killed
  // (timeout, cancel, a crash, a lost node) may have been writing them, and its last
  // explicit save stands.
  bool exited_itself = st.outcome.exit.term_signal == 0 && st.outcome.exit.exit_code >= 0
                       && st.stop_reason.empty();
  if (st.args.ckpt.capture && exited_itself && st.ckpt_pending == -2
      && !st.args.ckpt.dir.empty()) {
    auto sig = dir_signature(st.args.ckpt.dir);
    if (!sig.empty() && sig != st.ckpt_sig) {
      save_checkpoint(self, std::max<int64_t>(st.ckpt_step, 0));
      if (st.ckpt_busy)
        return;
    }
  }
  if (!st.args.ship_dir.empty()) { // shipped files: this attempt's only
    std::error_code ec;
    std::filesystem::remove_all(st.args.ship_dir, ec);
  }
  // The directory's files are in the store (or were never saved): it goes, unless its
  // last save failed (kept for the user to see, and said so).
  if (!st.args.ckpt.dir.empty()) {
    std::error_code ec;
    if (st.ckpt_ok)
      std::filesystem::remove_all(st.args.ckpt.dir, ec);
    else
      st.log->warn("job {} attempt {}: its checkpoint directory {} is kept: its last save failed",
                   st.args.job.short_str(), st.args.attempt, st.args.ckpt.dir);
  }
  self->send(st.coordinator, atoms::done::value, st.args.job, st.args.attempt, st.outcome);
  self->quit();
}

/// Starts the child: a process, or for a sweep's driver the sweep's optimizer actor (no
/// process: its launch result names no pid).
void start_child(worker_actor* self, launcher::spawn_callback on_spawned,
                 launcher::exit_callback on_exit) {
  auto& st = self->state;
  if (!st.args.in_node)
    return st.launch->spawn(st.args.request, on_spawned, on_exit);
  // `spawned` first: the actor may end (a sweep that does not read) before it is handled.
  on_spawned(launch_result{});
  st.child = spawn_sweep_actor(self->system(), st.args.request, caf::actor_cast<caf::actor>(self),
                               st.abandoned);
  self->monitor(st.child);
}

/// Makes the checkpoint directory, restores the newest checkpoint into it when the attempt
/// asks for one, then starts the child.
void restore_and_spawn(worker_actor* self, launcher::spawn_callback on_spawned,
                       launcher::exit_callback on_exit) {
  auto& st = self->state;
  auto& ck = st.args.ckpt;
  if (ck.dir.empty())
    return start_child(self, on_spawned, on_exit);
  std::error_code ec;
  std::filesystem::create_directories(ck.dir, ec);
  st.args.request.env.push_back("MONKEY_CHECKPOINT_DIR=" + ck.dir);
  auto target = checkpoints_of(self);
  if (!ck.restore || !target) {
    if (ck.restore)
      st.log->warn("job {} attempt {}: no checkpoint restored: the node's checkpoints actor is "
                   "not running",
                   st.args.job.short_str(), st.args.attempt);
    return start_child(self, on_spawned, on_exit);
  }
  ckpt_restore_args a{st.args.job, ck.from, ck.dir};
  self->request(target, std::chrono::minutes(10), atoms::ckpt_restore::value, std::move(a))
    .then(
      [=](ckpt_restored& r) {
        auto& st = self->state;
        if (r.step >= 0) {
          st.resumed_step = r.step;
          st.resumed_from = r.source.str();
          st.ckpt_step = r.step;
          st.ckpt_sig = dir_signature(st.args.ckpt.dir);
          st.args.request.env.push_back("MONKEY_CHECKPOINT_STEP=" + std::to_string(r.step));
          st.args.request.env.push_back("MONKEY_CHECKPOINT_JOB=" + r.source.str());
        }
        start_child(self, on_spawned, on_exit);
      },
      [=](caf::error& err) {
        launch_result res;
        res.error = "cannot restore the job's checkpoint: " + describe(err);
        on_spawned(res);
      });
}

/// Unpacks the shipped working directory and data (docs/shipping.md) into the attempt's
/// scratch directory, then restores and starts the child there.
void launch_child(worker_actor* self, launcher::spawn_callback on_spawned,
                  launcher::exit_callback on_exit) {
  auto& st = self->state;
  if (st.args.ship.empty())
    return restore_and_spawn(self, on_spawned, on_exit);
  auto target = checkpoints_of(self);
  if (!target) {
    launch_result res;
    res.error = "cannot unpack the shipped files: the node's checkpoints actor is not running";
    return on_spawned(res);
  }
  std::error_code ec;
  std::filesystem::remove_all(st.args.ship_dir, ec); // a previous try's leftovers
  ship_unpack_args a{st.args.ship, st.args.ship_dir};
  self->request(target, std::chrono::minutes(30), atoms::ship_unpack::value, std::move(a))
    .then(
      [=](ship_unpacked& u) {
        auto& st = self->state;
        auto& req = st.args.request;
        req.env.push_back("MONKEY_SCRATCH_DIR=" + st.args.ship_dir);
        req.env.push_back("MONKEY_DATA_DIR=" + st.args.ship_dir + "/data");
        for (auto& b : st.args.ship)
          if (b.kind == "workdir") {
            req.workdir = st.args.ship_dir + "/" + b.into + (b.cwd.empty() ? "" : "/" + b.cwd);
            req.env.push_back("MONKEY_SHIPPED_WORKDIR=" + b.source);
          }
        std::error_code ec;
        std::filesystem::create_directories(st.args.ship_dir + "/data", ec);
        st.log->info("job {} attempt {}: {} shipped file(s) ({} bytes, {} bundle(s) fetched from "
                     "other nodes) unpacked in {}",
                     st.args.job.short_str(), st.args.attempt, u.files, u.bytes, u.fetched,
                     st.args.ship_dir);
        restore_and_spawn(self, on_spawned, on_exit);
      },
      [=](caf::error& err) {
        launch_result res;
        res.error = "cannot unpack the shipped files: " + describe(err);
        on_spawned(res);
      });
}

/// `--mem` where the cgroup sets no memory.max (no cgroup v2, or no memory controller): the
/// resident memory of the job's process group is read every second, and a job over its
/// limit is killed at once (SIGKILL, as the OOM killer would).
void watch_memory(worker_actor* self) {
  auto& st = self->state;
  if (st.args.mem_limit_mb <= 0 || st.pgid <= 0 || st.over_limit_kb > 0 || st.exited)
    return;
  if (++st.ticks % 2 != 0)
    return;
  if (st.cgroup_mem < 0) // read once: the attempt's cgroup keeps its limit
    st.cgroup_mem = cgroup_memory_limited(st.cgroup) ? 1 : 0;
  if (st.cgroup_mem == 1)
    return;
  auto rss = group_rss_kb(st.pgid);
  if (rss <= st.args.mem_limit_mb * 1024)
    return;
  st.over_limit_kb = rss;
  st.log->warn("job {} attempt {}: {} MB resident, over its --mem limit of {} MB: killed",
               st.args.job.short_str(), st.args.attempt, rss / 1024, st.args.mem_limit_mb);
  signal_job(st.cgroup, st.pgid, SIGKILL);
}

void begin_stop(worker_actor* self, const std::string& reason) {
  auto& st = self->state;
  if (st.exited || !st.stop_reason.empty())
    return;
  st.stop_reason = reason;
  if (st.pid > 0) {
    signal_job(st.cgroup, st.pgid, SIGTERM);
    self->delayed_send(self, st.args.kill_grace, atoms::kill::value);
  } else if (st.child) {
    if (reason == "requeued") // its trials run on: it ends without another request
      *st.abandoned = true;
    self->send(st.child, atoms::stop::value, reason);
    self->delayed_send(self, st.args.kill_grace, atoms::kill::value);
  }
}

attempt_result judge(worker_state& st, const exit_info& ex) {
  attempt_result r;
  r.exit = ex;
  auto sig_text = [&] {
    return "killed by signal " + std::to_string(ex.term_signal) + " ("
           + signal_name(ex.term_signal) + ")";
  };
  std::string how = ex.term_signal ? sig_text() : "exit " + std::to_string(ex.exit_code);
  if (!st.lost.empty())
    how = st.lost;
  if (st.stop_reason.empty() && !st.lost.empty()) {
    // Ended with a worker before this one: requeued, as a re-adopted child would have run
    // on; died by itself: failed.
    r.outcome = st.args.adopt ? "requeued" : "failed";
    r.cause = st.lost;
  } else if (st.stop_reason == "timeout") {
    r.outcome = "timeout";
    r.cause = "timeout after " + std::to_string(static_cast<int64_t>(st.args.timeout_s))
              + " s (" + (st.killed ? "SIGKILL after the grace period" : how) + ")";
  } else if (st.stop_reason == "cancelled") {
    r.outcome = "cancelled";
    r.cause = "cancelled (" + how + ")";
  } else if (st.stop_reason == "stopped") {
    r.outcome = "stopped";
    r.cause = "stopped early (" + how + ")";
  } else if (st.stop_reason == "requeued") {
    r.outcome = "requeued";
    r.cause = "stopped for requeue: the runtime is shutting down (" + how + ")";
  } else if (ex.term_signal == 0 && ex.exit_code == 0) {
    r.outcome = "succeeded";
    r.cause = "exit 0";
  } else {
    r.outcome = "failed";
    r.cause = how;
    if (cgroup_oom_killed(st.cgroup)) {
      r.cause = st.args.mem_limit_mb > 0
                  ? "killed by the OOM killer: over its --mem limit of "
                      + std::to_string(st.args.mem_limit_mb) + " MB (cgroup memory.max)"
                  : "killed by the OOM killer (cgroup memory.events)";
    } else if (st.over_limit_kb > 0) {
      r.cause = "killed: out of memory, " + std::to_string(st.over_limit_kb / 1024)
                + " MB resident over its --mem limit of " + std::to_string(st.args.mem_limit_mb)
                + " MB (the runtime's memory watch; no cgroup memory limit here)";
    } else if (ex.term_signal == SIGKILL) {
      bool near_limit = st.args.mem_limit_mb > 0
                        && ex.max_rss_kb >= st.args.mem_limit_mb * 1024 * 9 / 10;
      r.cause += near_limit ? "; probably the OOM killer (best guess: its peak memory was near "
                              "its limit, and no cgroup memory accounting is available here)"
                            : "; possibly the OOM killer (best guess: no cgroup memory "
                              "accounting is available here)";
    }
  }
  return r;
}

caf::behavior worker_impl(worker_actor* self, worker_args args, caf::actor coordinator,
                          caf::actor journal, std::shared_ptr<launcher> launch) {
  auto& st = self->state;
  st.args = std::move(args);
  st.coordinator = std::move(coordinator);
  st.journal = std::move(journal);
  st.launch = std::move(launch);
  st.log = logger("worker");
  st.last_refill_ms = now_ms();
  st.tokens = st.args.metric_rate * 10.0;
  caf::actor me = caf::actor_cast<caf::actor>(self);
  auto on_exit = [me](const exit_info& ex) { caf::anon_send(me, atoms::exited::value, ex); };
  // An optimizer actor that ended without saying how (it died) ended like a killed child;
  // one that said so said it first.
  self->set_down_handler([=](const caf::down_msg& dm) {
    auto& st = self->state;
    if (!st.child || dm.source != st.child.address() || st.exited)
      return;
    st.lost = "the sweep's optimizer actor ended: " + describe(dm.reason);
    st.log->warn("job {} attempt {}: {}", st.args.job.short_str(), st.args.attempt, st.lost);
    exit_info ex;
    ex.term_signal = SIGKILL;
    self->send(self, atoms::exited::value, ex);
  });
  auto arm_timeout = [self] {
    auto& st = self->state;
    if (st.args.timeout_s <= 0)
      return;
    auto deadline = st.args.started_ms + static_cast<int64_t>(st.args.timeout_s * 1000);
    auto left = std::max<int64_t>(0, deadline - now_ms());
    self->delayed_send(self, std::chrono::milliseconds(left), atoms::timeout::value);
  };
  auto on_spawned = [me](const launch_result& res) {
    caf::anon_send(me, atoms::spawned::value, res);
  };
  if (st.args.adopt && st.args.in_node) {
    // A sweep's optimizer actor ended with the worker before this one.
    st.lost = "the sweep's optimizer actor ended with its worker (the node's coordinator or "
              "the worker restarted); requeued, the next attempt goes on from the checkpoint";
    exit_info ex;
    ex.term_signal = SIGKILL;
    caf::anon_send(me, atoms::exited::value, ex);
  } else if (st.args.adopt && st.args.adopt_pid == 0) {
    // Restarted before the pid was known: find the child by its log path.
    if (!st.launch->adopt_request(st.args.stdout_path, on_spawned, on_exit)) {
      exit_info ex;
      ex.term_signal = SIGKILL;
      caf::anon_send(me, atoms::exited::value, ex);
    }
  } else if (st.args.adopt_pid > 0) {
    st.ckpt_sig = dir_signature(st.args.ckpt.dir); // saved before the restart, if at all
    st.pid = st.args.adopt_pid;
    st.pgid = st.args.pgid;
    st.cgroup = st.args.cgroup_dir;
    st.spawned = true;
    if (!st.launch->adopt(st.pid, on_exit)) {
      // Gone without our launcher seeing it: nothing to report but that it was lost.
      exit_info ex;
      ex.pid = st.pid;
      ex.term_signal = SIGKILL;
      caf::anon_send(me, atoms::exited::value, ex);
    }
    arm_timeout();
    self->send(self, atoms::tick::value);
  } else {
    launch_child(self, on_spawned, on_exit);
  }
  return {
    [=](atoms::spawned, launch_result res) {
      auto& st = self->state;
      res.resumed_step = st.resumed_step;
      res.resumed_from = st.resumed_from;
      if (!res.error.empty()) {
        attempt_result r;
        r.outcome = "failed";
        r.cause = res.error;
        if (!st.args.ship_dir.empty()) {
          std::error_code ec;
          std::filesystem::remove_all(st.args.ship_dir, ec);
        }
        self->send(st.coordinator, atoms::done::value, st.args.job, st.args.attempt, r);
        self->quit();
        return;
      }
      st.pid = res.pid;
      st.pgid = res.pgid;
      st.cgroup = res.cgroup_dir;
      st.spawned = true;
      self->send(st.coordinator, atoms::started::value, st.args.job, st.args.attempt, res);
      arm_timeout();
      if (!st.stop_reason.empty()) { // a stop arrived before the child ran
        auto why = st.stop_reason;
        st.stop_reason.clear();
        begin_stop(self, why);
      }
      // The first scan comes after one interval: a short job is scanned once, at its exit.
      self->delayed_send(self, std::chrono::milliseconds(500), atoms::tick::value);
    },
    [=](atoms::exited, const exit_info& ex) {
      auto& st = self->state;
      if (st.exited) // an optimizer actor's end, and its down message after it
        return;
      st.exited = true;
      scan_metrics(self);
      if (st.dropped_metrics > 0)
        st.log->warn("job {} attempt {}: dropped {} metric points over the rate cap of {}/s",
                     st.args.job.short_str(), st.args.attempt, st.dropped_metrics,
                     st.args.metric_rate);
      st.outcome = judge(st, ex);
      // Whatever the main process left behind in its group or cgroup goes with it.
      signal_job(st.cgroup, st.pgid, SIGKILL);
      st.launch->retire_cgroup(st.cgroup);
      st.finishing = true;
      finish(self);
    },
    [=](atoms::stop, const std::string& why) {
      auto& st = self->state;
      if (!st.spawned) { // not spawned yet: remember
        if (st.stop_reason.empty())
          st.stop_reason = why;
        return;
      }
      begin_stop(self, why);
    },
    [=](atoms::timeout) { begin_stop(self, "timeout"); },
    [=](atoms::kill) {
      auto& st = self->state;
      if (!st.exited) {
        st.killed = true;
        signal_job(st.cgroup, st.pgid, SIGKILL);
        if (st.child) {
          *st.abandoned = true;
          self->send_exit(st.child, caf::exit_reason::kill);
        }
      }
    },
    [=](atoms::tick) {
      if (self->state.exited)
        return;
      scan_metrics(self);
      watch_memory(self);
      self->delayed_send(self, std::chrono::milliseconds(500), atoms::tick::value);
    },
  };
}

} // namespace

caf::actor spawn_worker(caf::actor_system& sys, worker_args args, caf::actor coordinator,
                        caf::actor journal, std::shared_ptr<launcher> launch) {
  return sys.spawn(worker_impl, std::move(args), std::move(coordinator), std::move(journal),
                   std::move(launch));
}

} // namespace monkey
