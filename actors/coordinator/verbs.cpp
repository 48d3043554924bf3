// SPDX-License-Identifier: Apache-2.0
// The job verbs as this node answers them from its own records (the router asks every
// member and merges the answers): show, why, cancel, logs, the local list, status.
#include "actors/coordinator/state.hpp"

#include "actors/checkpoints.hpp"

#include <algorithm>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include "actors/fan_out.hpp"

namespace monkey {

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
  s.final = is_final(rec.state);
  s.params = rec.spec.params;
  s.sweep = rec.spec.sweep;
  s.trial = rec.spec.trial;
  s.driver = rec.spec.driver;
  for (auto& n : rec.replicas)
    s.holders.push_back(n);
  return s;
}

namespace {

std::string why_text(coordinator_state& st, const job_record& rec) {
  // A final record says how the job ended on every holder (its owner may be dead).
  if (is_final(rec.state) && !st.finals.count(rec.id))
    return std::string("finished: ") + to_string(rec.state) + " (" + rec.reason + ")";
  if (!st.book.owns(rec.id)) {
    if (st.book.unsynced().count(rec.id))
      return "this node's record waits to hear from the cluster (after a restart or a fence)";
    auto owner = rec.owner.str();
    auto os = st.view.state_of(owner);
    if (!is_final(rec.state) && (os == member_state::dead || os == member_state::left)) {
      // The owner is gone: a surviving holder the record names adopts the job; a copy no
      // surviving holder backs (a stray one, kept by a former owner) waits for one.
      for (auto& h : rec.replicas)
        if (h == st.self_node() || st.view.alive(h))
          return "held here as a replica; owner " + owner + " is gone: a surviving holder "
                 "adopts it";
      return "unavailable: owner " + owner + " and every holder of the record are gone; a copy "
             "stays here, and the job returns when a holder restarts on its data directory";
    }
    return "held here as a replica; owner " + owner;
  }
  switch (rec.state) {
    case job_state::queued:
      if (!st.accepting && !st.draining)
        return "the node is shutting down";
      if (!st.view.majority())
        return st.view.minority_text() + ": it starts no new attempts until it heals";
      return explain_wait(st, rec.id);
    case job_state::running:
      return "running attempt " + std::to_string(rec.attempts.back().number)
             + (rec.spec.driver ? " (the sweep's optimizer actor in its node)"
                                : " (pid " + std::to_string(rec.attempts.back().pid) + ")");
    default:
      if (st.finals.count(rec.id))
        return std::string("finished: ") + to_string(rec.state) + " (" + rec.reason
               + "); its holders are confirming the final state";
      return std::string("finished: ") + to_string(rec.state) + " (" + rec.reason + ")";
  }
}

/// The job `text` names here, or nullopt after answering `rp`: bad_request when the text
/// is ambiguous or too short, not_found when no job here matches.
std::optional<job_id> lookup(const coordinator_state& st, const std::string& text,
                             caf::response_promise& rp) {
  auto m = st.book.match(text);
  if (auto id = m.match())
    return id;
  rp.deliver(make_error(m.ambiguous() || m.too_short() ? errc::bad_request : errc::not_found,
                        m.problem() + (m.ambiguous() || m.too_short() ? "" : " on this node")));
  return std::nullopt;
}

} // namespace

void on_show(coordinator_actor* self, caf::response_promise rp, const id_request& req) {
  auto& st = self->state;
  auto id = lookup(st, req.id, rp);
  if (!id)
    return;
  // The record is taken now, before the metrics: a final record then implies that its
  // worker's last metrics reached the journal before this request does.
  auto snapshot = std::make_shared<show_reply>();
  snapshot->record = *st.book.find(*id);
  snapshot->why = why_text(st, snapshot->record);
  auto jid = *id;
  auto key = req.metric;
  auto journal = st.journal;
  self->request(journal, std::chrono::seconds(10), atoms::metric_sum::value, jid)
    .then(
      [=](const metric_stats_map& history) mutable {
        snapshot->metric_history = history;
        for (auto& [k, s] : history)
          snapshot->last_metrics[k] = s.last;
        if (key.empty())
          return rp.deliver(reply(*snapshot));
        self->request(journal, std::chrono::seconds(10), atoms::metric_sum::value, jid, key,
                      uint32_t{100000})
          .then(
            [=](const metric_batch& points) mutable {
              snapshot->series = points;
              rp.deliver(reply(*snapshot));
            },
            [=](const caf::error& err) mutable { rp.deliver(err); });
      },
      [=](const caf::error& err) mutable { rp.deliver(err); });
}

void on_why(coordinator_actor* self, caf::response_promise rp, const id_request& req) {
  auto& st = self->state;
  auto id = lookup(st, req.id, rp);
  if (!id)
    return;
  rp.deliver(reply(text_reply{why_text(st, *st.book.find(*id))}));
}

void on_cancel(coordinator_actor* self, caf::response_promise rp, const id_request& req) {
  auto& st = self->state;
  auto id = lookup(st, req.id, rp);
  if (!id)
    return;
  auto* rec = st.book.owned(*id);
  if (!rec) {
    auto* copy = st.book.find(*id);
    return rp.deliver(make_error(errc::not_found, "job " + id->short_str()
                                                    + " is owned by node " + copy->owner.str()
                                                    + ", not this one"));
  }
  if (is_final(rec->state))
    return rp.deliver(make_error(errc::conflict, "job " + id->short_str() + " already ended ("
                                                   + to_string(rec->state) + ")"));
  const char* word = req.stop ? "stopped" : "cancelled";
  if (rec->state == job_state::queued) {
    auto before = *rec;
    st.book.dequeue(*id);
    touch(*rec, req.stop ? job_state::stopped : job_state::cancelled,
          req.stop ? "stopped while queued" : "cancelled while queued", now_ms());
    auto jid = *id;
    commit_final(self, jid, before, [=](final_outcome outcome) mutable {
      switch (outcome) {
        case final_outcome::committed:
          rp.deliver(reply(text_reply{std::string(word) + " " + jid.short_str()}));
          break;
        case final_outcome::superseded:
          rp.deliver(make_error(errc::conflict, "job " + jid.short_str()
                                                  + " moved to another owner meanwhile: ask "
                                                    "again"));
          break;
        case final_outcome::failed:
          rp.deliver(make_error(errc::journal_failure,
                                "job " + jid.short_str()
                                  + " is " + word + " on its holders, but this node's journal "
                                    "write failed (it is written again later)"));
          break;
      }
      request_schedule(self);
    });
    return;
  }
  auto& run = st.running[*id];
  std::string how = req.stop ? "stopped" : "cancelled";
  if (run.gang)
    stop_gang(self, *id, how); // every part, told with the next poll
  else if (run.worker)
    self->send(run.worker, atoms::stop::value, how);
  else
    run.stop_pending = how;
  rp.deliver(reply(text_reply{
    std::string(req.stop ? "stopping " : "cancelling ") + id->short_str()
    + (rec->spec.driver ? " (its optimizer actor stops the sweep's running trials, then ends)"
                        : " (SIGTERM to its process group, SIGKILL after the grace period)")}));
}

namespace {

/// Reads up to `max` bytes of `path` from `offset` into `r`; true when that is its end.
bool read_log(const std::string& path, uint64_t offset, uint32_t max, logs_reply& r) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return true;
  r.data.resize(max);
  auto got = ::pread(fd, r.data.data(), max, static_cast<off_t>(offset));
  r.data.resize(got > 0 ? static_cast<size_t>(got) : 0);
  r.offset += r.data.size();
  struct stat sb {};
  ::fstat(fd, &sb);
  ::close(fd);
  return static_cast<uint64_t>(sb.st_size) <= r.offset;
}

/// The log of a gang part this node ran: its files, by job id and attempt, no record.
void part_logs(coordinator_actor* self, caf::response_promise& rp, const logs_request& req) {
  auto& st = self->state;
  auto id = job_id::parse(req.id);
  if (!id || req.attempt < 1 || (req.stream != "out" && req.stream != "err"))
    return rp.deliver(make_error(errc::bad_request, "part logs: a full job id, an attempt and "
                                                    "a stream are needed"));
  auto base = st.cfg.data_dir + "/logs/" + id->str() + "/" + std::to_string(req.attempt);
  auto out = base + ".out";
  auto path = req.rank >= 0 ? rank_log_path(out, req.rank) : req.stream == "out" ? out
                                                                                : base + ".err";
  logs_reply r;
  r.attempt = req.attempt;
  r.offset = req.offset;
  auto max = std::min<uint32_t>(req.max_bytes == 0 ? 65536 : req.max_bytes, 1 << 20);
  bool at_end = read_log(path, req.offset, max, r);
  auto* p = find_part(st, *id, req.attempt);
  r.finished = at_end && (!p || p->status.state != "running");
  rp.deliver(reply(r));
}

} // namespace

void on_logs(coordinator_actor* self, caf::response_promise rp, const logs_request& req) {
  auto& st = self->state;
  if (req.part)
    return part_logs(self, rp, req);
  auto id = lookup(st, req.id, rp);
  if (!id)
    return;
  auto& rec = *st.book.find(*id);
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
  if (at.id.node != st.cfg.node)
    return rp.deliver(make_error(errc::not_found, "the logs of job " + id->short_str()
                                                    + " attempt " + std::to_string(n)
                                                    + " are on node " + at.id.node.str()));
  logs_reply r;
  r.attempt = n;
  r.attempts = static_cast<int32_t>(rec.attempts.size());
  r.offset = req.offset;
  auto max = std::min<uint32_t>(req.max_bytes == 0 ? 65536 : req.max_bytes, 1 << 20);
  bool ranked = !rec.spec.app.empty() || rec.spec.ranks() > 1;
  if (req.rank >= 0 && (!ranked || req.rank >= rec.spec.ranks()))
    return rp.deliver(make_error(errc::bad_request,
                                 "--rank " + std::to_string(req.rank) + ": job " + id->short_str()
                                   + (!ranked ? " has no ranks (one process, no --workers)"
                                              : " has ranks 0 to "
                                                  + std::to_string(rec.spec.ranks() - 1))));
  // A gang across nodes: the rank's log (without --rank: the attempt's output, rank 0's
  // part's) is on the node that hosted it.
  if (spans_nodes(at, st.self_node())) {
    auto want = std::max<int32_t>(0, req.rank);
    std::string node;
    for (auto& h : at.hosts) {
      auto colon = h.rfind(':');
      auto ranks = parse_rank_list(h.substr(colon + 1));
      if (std::find(ranks.begin(), ranks.end(), want) != ranks.end())
        node = h.substr(0, colon);
    }
    if (!node.empty() && node != st.self_node()) {
      if (!st.membership || (!st.view.alive(node)))
        return rp.deliver(make_error(errc::unavailable,
                                     "rank " + std::to_string(want) + " of job " + id->short_str()
                                       + " ran on node " + node_label(st.view.members(), node)
                                       + ", which is not alive: its log is there"));
      auto fwd = req;
      fwd.id = id->str();
      fwd.attempt = n;
      fwd.part = true;
      fwd.local = true; // straight to its coordinator
      bool final = is_final(rec.state);
      int32_t attempts = r.attempts;
      ask_node(self, st.membership, node, verb::logs, encode(fwd), peer_timeout::query)
        .then(
          [=](const std::string& body) mutable {
            auto got = decode<logs_reply>(body, "logs");
            if (!got)
              return rp.deliver(make_error(errc::internal, got.error()));
            got->attempts = attempts;
            got->job_final = final;
            rp.deliver(reply(*got));
          },
          [=](const caf::error& err) mutable { rp.deliver(err); });
      return;
    }
  }
  auto path = req.rank >= 0 ? rank_log_path(at.log_out, req.rank)
                            : req.stream == "out" ? at.log_out : at.log_err;
  bool at_end = read_log(path, req.offset, max, r);
  bool last_attempt = n == rec.attempts.back().number;
  r.finished = at_end && (!last_attempt || at.outcome != "running");
  r.job_final = is_final(rec.state);
  rp.deliver(reply(r));
}

void on_list(coordinator_actor* self, caf::response_promise rp, const list_request& req) {
  auto& st = self->state;
  list_reply r;
  auto add = [&](const job_record& rec) {
    if (!req.state.empty() && req.state != to_string(rec.state))
      return;
    if (!req.key.empty() && rec.client_key != req.key)
      return;
    if (!req.sweep.empty() && rec.spec.sweep != req.sweep)
      return;
    r.jobs.push_back(summarize(rec));
  };
  if (!req.key.empty()) {
    for (auto& id : st.book.by_key(req.key))
      if (auto* rec = st.book.find(id))
        add(*rec);
    return rp.deliver(reply(r));
  }
  if (!req.id.empty()) { // the jobs a suffix names here (the router resolves it)
    auto m = st.book.match(req.id);
    for (auto& id : m.matches())
      if (auto* rec = st.book.find(id))
        add(*rec);
    return rp.deliver(reply(r));
  }
  st.book.each_record(add);
  if (!req.metrics)
    return rp.deliver(reply(r));
  // Metric points are in the journals of the node that ran the attempt and of the job's
  // holders (peer_metrics).
  id_list ids;
  for (auto& row : r.jobs)
    ids.push_back(row.id);
  auto rows = std::make_shared<list_reply>(std::move(r));
  self->request(st.journal, std::chrono::seconds(20), atoms::last_metrics::value, ids)
    .then(
      [=](const metrics_by_job& last) mutable {
        for (auto& row : rows->jobs)
          if (auto it = last.find(row.id); it != last.end())
            for (auto& [key, s] : it->second) {
              row.metrics[key] = s.last;
              row.metric_counts[key] = s.count;
            }
        rp.deliver(reply(*rows));
      },
      [=](const caf::error&) mutable { rp.deliver(reply(*rows)); });
}

namespace {

int remove_path(const char* path, const struct stat*, int, struct FTW*) {
  return ::remove(path);
}

} // namespace

void on_forget(coordinator_actor* self, caf::response_promise rp, const forget_request& req) {
  auto& st = self->state;
  forget_reply out;
  write_batch batch;
  for (auto& id : req.ids) {
    if (st.tombstones.count(id)) {
      out.forgotten.push_back(id);
      continue;
    }
    auto* rec = st.book.find(id);
    if (rec && !is_final(rec->state)) {
      out.refused.push_back(id.short_str() + ": " + to_string(rec->state) + " on node "
                            + st.self_node() + " (cancel it first)");
      continue;
    }
    if (st.running.count(id) || st.finals.count(id)) {
      out.refused.push_back(id.short_str() + ": its final state is still being committed on "
                            + st.self_node() + "; try again");
      continue;
    }
    st.book.erase(id);
    st.tombstones.insert(id);
    st.remote.erase(id);
    batch.erase.push_back(id);
    batch.tombstones.push_back(id);
    out.forgotten.push_back(id);
    auto dir = st.cfg.data_dir + "/logs/" + id.str();
    ::nftw(dir.c_str(), remove_path, 16, FTW_DEPTH | FTW_PHYS);
    if (auto ck = self->system().registry().get(caf::atom_from_string(checkpoints_name)))
      self->send(caf::actor_cast<caf::actor>(ck), atoms::ckpt_forget::value, id);
  }
  if (batch.empty())
    return rp.deliver(reply(out));
  auto n = batch.erase.size();
  self->request(st.journal, caf::infinite, atoms::write::value, std::move(batch))
    .then(
      [=](bool) mutable {
        self->state.log->info("removed {} jobs with their logs and metrics (monkey rm from {})",
                              n, req.from);
        rp.deliver(reply(out));
      },
      [=](const caf::error& err) mutable {
        rp.deliver(make_error(errc::journal_failure,
                              "the deletion could not be journaled: " + describe(err)));
      });
}

void drop_forgotten(coordinator_actor* self, std::vector<job_record>& records,
                    const std::string& from) {
  auto& st = self->state;
  if (st.tombstones.empty())
    return;
  std::vector<job_id> gone;
  records.erase(std::remove_if(records.begin(), records.end(),
                               [&](const job_record& r) {
                                 if (!st.tombstones.count(r.id))
                                   return false;
                                 gone.push_back(r.id);
                                 return true;
                               }),
                records.end());
  if (gone.empty() || from.empty() || from == st.self_node() || !st.membership)
    return;
  st.log->info("{} sent copies of {} jobs removed by monkey rm: it is told to remove them",
               from, gone.size());
  ask_node(self, st.membership, from, verb::peer_forget,
           encode(forget_request{st.self_node(), std::move(gone)}), std::chrono::seconds(10))
    .then([](const std::string&) {}, [](const caf::error&) {});
}

status_reply make_status(const coordinator_state& st) {
  status_reply s;
  s.node = st.self_node();
  s.incarnation = st.cfg.incarnation;
  s.address = st.cfg.address;
  s.pid = st.cfg.pid;
  s.started_ms = st.cfg.started_ms;
  s.version = st.cfg.version;
  s.accepting = st.accepting;
  for (auto& [id, rec] : st.book.owned_all())
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
  auto size = [&](const char* name, size_t n) { s.sizes[name] = static_cast<int64_t>(n); };
  size("jobs_owned", st.book.owned_all().size());
  size("jobs_held", st.book.held_all().size());
  size("jobs_unsynced", st.book.unsynced().size());
  size("client_keys", st.book.keys());
  size("running", st.running.size());
  size("finals_pending", st.finals.size());
  size("remote_states", st.remote.size());
  size("offered", st.offered.size());
  size("refused_by", st.refused_by.size());
  size("metric_points_out", st.metrics_out.waiting());
  size("metric_points_dropped", st.metrics_out.dropped());
  size("withdrawn", st.withdrawn.size());
  size("members", st.view.members().size());
  size("members_dead", st.view.in_state(member_state::dead).size()
                         + st.view.in_state(member_state::left).size());
  return s;
}

} // namespace monkey
