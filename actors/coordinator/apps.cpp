// SPDX-License-Identifier: Apache-2.0
// The verbs of the app hosts this node started (docs/writing-apps.md): their metric points
// (stored like a command job's, with the rank), their ready message (their actors, shown by
// `tree`), and the rank kills that `monkey kill` asks for, told with the next report.
#include "actors/coordinator/state.hpp"

#include "actors/checkpoints.hpp"

namespace monkey {

namespace {

/// The running job whose current attempt is `attempt` (an app host's session), or nullptr.
std::pair<const job_id*, run_info*> attempt_of(coordinator_state& st, const std::string& attempt) {
  for (auto& [id, run] : st.running)
    if (run.attempt_id == attempt)
      return {&id, &run};
  return {nullptr, nullptr};
}

} // namespace

namespace {

/// The report of an app host that runs a part of a gang across nodes: its points go to the
/// job's holders; the answer carries the owner's orders (peers, rank kills, a stop).
void part_report(coordinator_actor* self, caf::response_promise& rp, part_run& p,
                 app_report_request& req) {
  if (req.points.size() > 65536)
    return rp.deliver(make_error(errc::bad_request, "app report: more than 65536 points"));
  metric_batch points;
  points.reserve(req.points.size());
  for (auto& pt : req.points) {
    if (pt.rank < 0 || pt.rank >= p.rec.spec.ranks() || pt.key.empty() || pt.key.size() > 256)
      continue;
    pt.job = p.job;
    pt.attempt = p.number;
    points.push_back(std::move(pt));
  }
  app_report_reply r;
  r.kill_ranks.swap(p.kill_ranks);
  r.peers = p.peers;
  r.stop = p.stop;
  if (!points.empty())
    self->send(self, atoms::metric::value, std::move(points));
  rp.deliver(reply(r));
}

} // namespace

void on_app_report(coordinator_actor* self, caf::response_promise rp, app_report_request req) {
  auto& st = self->state;
  if (auto* p = part_by_attempt(st, req.attempt))
    return part_report(self, rp, *p, req);
  auto [id, run] = attempt_of(st, req.attempt);
  if (!id)
    return rp.deliver(make_error(errc::not_found, "attempt " + req.attempt
                                                    + " does not run on this node"));
  auto* rec = st.book.find(*id);
  if (req.points.size() > 65536)
    return rp.deliver(make_error(errc::bad_request, "app report: more than 65536 points"));
  // The session's attempt names the job: a host cannot write another job's points.
  metric_batch points;
  points.reserve(req.points.size());
  for (auto& p : req.points) {
    if (p.rank < 0 || (rec && p.rank >= rec->spec.ranks()) || p.key.empty() || p.key.size() > 256)
      continue;
    p.job = *id;
    p.attempt = run->attempt;
    points.push_back(std::move(p));
  }
  app_report_reply r;
  r.kill_ranks.swap(run->kill_ranks);
  if (!points.empty())
    self->send(self, atoms::metric::value, std::move(points));
  rp.deliver(reply(r));
}

void on_app_ready(coordinator_actor* self, caf::response_promise rp, const app_ready_request& req) {
  auto& st = self->state;
  if (auto* p = part_by_attempt(st, req.attempt)) {
    if (req.actors.size() != req.ranks.size())
      return rp.deliver(make_error(errc::bad_request, "app ready: one actor type per rank expected"));
    p->status.ranks = req.ranks;
    p->status.actors = req.actors;
    p->status.endpoint = req.endpoint;
    p->status.pid = req.pid;
    st.log->info("job {} attempt {}: app host {} runs ranks {} (a gang part; rank directory at "
                 "{})",
                 p->job.short_str(), p->number, req.pid, rank_list_text(req.ranks), req.endpoint);
    return rp.deliver(reply(true));
  }
  auto [id, run] = attempt_of(st, req.attempt);
  if (!id)
    return rp.deliver(make_error(errc::not_found, "attempt " + req.attempt
                                                    + " does not run on this node"));
  if (req.actors.size() != req.ranks.size())
    return rp.deliver(make_error(errc::bad_request, "app ready: one actor type per rank expected"));
  run->app_ranks = req.ranks;
  run->app_actors = req.actors;
  st.log->info("job {} attempt {}: app host {} runs ranks {}", id->short_str(), run->attempt,
               req.pid, rank_list_text(req.ranks));
  rp.deliver(reply(true));
}

void on_app_checkpoint(coordinator_actor* self, caf::response_promise rp,
                       const app_checkpoint_request& req) {
  auto& st = self->state;
  // The session's attempt names the job, its ranks and its checkpoint directory here.
  job_id job;
  int32_t number = 0;
  std::vector<int32_t> own;
  const job_record* rec = nullptr;
  if (auto* p = part_by_attempt(st, req.attempt)) {
    job = p->job;
    number = p->number;
    own = p->ranks;
    rec = &p->rec;
  } else if (auto [id, run] = attempt_of(st, req.attempt); id) {
    job = *id;
    number = run->attempt;
    own = run->app_ranks;
    rec = st.book.find(*id);
  }
  if (!rec)
    return rp.deliver(make_error(errc::not_found, "attempt " + req.attempt
                                                    + " does not run on this node"));
  if (req.step < 0 || req.ranks.empty())
    return rp.deliver(make_error(errc::bad_request, "app checkpoint: a step of 0 or more and "
                                                    "the ranks that saved it"));
  for (auto r : req.ranks)
    if (std::find(own.begin(), own.end(), r) == own.end())
      return rp.deliver(make_error(errc::bad_request, "app checkpoint: rank " + std::to_string(r)
                                                        + " does not run in this host"));
  auto target = caf::actor_cast<caf::actor>(
    self->system().registry().get(caf::atom_from_string(checkpoints_name)));
  if (!target)
    return rp.deliver(make_error(errc::busy, "the node's checkpoints actor is restarting; try "
                                             "again"));
  ckpt_save_args a;
  a.job = job;
  a.step = req.step;
  a.src = checkpoint_dir(st, job, number) + "/.save/" + std::to_string(req.step);
  a.move = true;
  a.holders = rec->replicas;
  a.label = "ranks " + rank_list_text(req.ranks);
  a.world = rec->spec.ranks();
  self->request(target, std::chrono::minutes(10), atoms::ckpt_save::value, std::move(a))
    .then(
      [=](ckpt_saved& saved) mutable {
        app_checkpoint_reply r;
        r.copies = static_cast<int32_t>(saved.nodes.size());
        r.nodes = saved.nodes;
        rp.deliver(reply(r));
      },
      [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
}

caf::result<std::string> kill_rank(coordinator_actor* self, const std::string& name) {
  auto slash = name.find("/rank-");
  auto worker = name.substr(0, slash);
  auto text = name.substr(slash + 6);
  char* end = nullptr;
  auto rank = std::strtol(text.c_str(), &end, 10);
  for (auto& [attempt, p] : self->state.parts) {
    if ("worker-" + p.job.short_str() + "-" + std::to_string(p.number) != worker)
      continue;
    if (text.empty() || *end != '\0'
        || std::find(p.ranks.begin(), p.ranks.end(), rank) == p.ranks.end())
      return make_error(errc::not_found, "this part of job " + p.job.short_str()
                                           + " hosts no rank '" + text + "' (it hosts ranks "
                                           + rank_list_text(p.ranks) + ")");
    p.kill_ranks.push_back(static_cast<int32_t>(rank));
    return "killing rank " + std::to_string(rank) + " of job " + p.job.short_str()
           + " at its app host's next report; in a gang across nodes the app's gang policy "
             "starts the whole gang again (a new attempt, from its newest checkpoint)";
  }
  for (auto& [id, run] : self->state.running) {
    if ("worker-" + id.short_str() + "-" + std::to_string(run.attempt) != worker)
      continue;
    auto* rec = self->state.book.find(id);
    if (text.empty() || *end != '\0' || rank < 0 || (rec && rank >= rec->spec.ranks()))
      return make_error(errc::not_found, "job " + id.short_str() + " has no rank '" + text + "'");
    if (run.app_actors.empty())
      return make_error(errc::conflict, worker + " hosts no app actors (yet)");
    run.kill_ranks.push_back(static_cast<int32_t>(rank));
    // Plain text, as the supervisors' answers to kill (runtime/supervision/supervisor.cpp).
    return "killing rank " + std::to_string(rank) + " of job " + id.short_str()
           + " at its app host's next report (within a second); the app's policy ("
           + "gang or rank) starts it again";
  }
  return make_error(errc::not_found, "no " + worker + " on this node");
}

} // namespace monkey
