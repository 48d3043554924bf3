// SPDX-License-Identifier: Apache-2.0
// monkey show ID and monkey why ID: a job's record, wherever in the cluster it is.
#include "runtime/bin/cli/cli.hpp"

#include <iostream>

namespace monkey::cli {

namespace {

int run_show(context& ctx, const std::string& id) {
  auto c = ctx.connect();
  if (!c)
    return fail(c.error());
  auto r = (*c)->call<show_reply>(verb::show, id_request{id});
  if (!r)
    return fail("show: " + r.error());
  if (ctx.g.json) {
    std::cout << to_json(*r).dump(2) << "\n";
    return 0;
  }
  auto& rec = r->record;
  std::string cmd;
  for (auto& a : rec.spec.command)
    cmd += (cmd.empty() ? "" : " ") + a;
  std::printf("job       %s (%s)\n", rec.id.str().c_str(), display_name(rec.spec).c_str());
  std::printf("state     %s — %s\n", to_string(rec.state), rec.reason.c_str());
  std::printf("command   %s\n",
              rec.spec.app.empty() ? cmd.c_str() : ("app " + rec.spec.app).c_str());
  for (auto& [k, v] : rec.spec.params)
    std::printf("param     %s=%s\n", k.c_str(), v.c_str());
  std::printf("resources cpus=%d gpus=%d mem=%lldMB\n", rec.spec.cpus, rec.spec.gpus,
              static_cast<long long>(rec.spec.mem_mb));
  std::printf("retries   %d/%d used, requeues %d/%d used, timeout %s, priority %d, seed %llu\n",
              rec.retries_used, rec.spec.retries, rec.requeues_used, rec.spec.max_requeues,
              rec.spec.timeout_s > 0 ? (std::to_string(rec.spec.timeout_s) + "s").c_str()
                                     : "none",
              rec.spec.priority, static_cast<unsigned long long>(rec.spec.seed));
  for (auto& d : rec.spec.after)
    std::printf("after     %s:%s\n", d.kind.c_str(), d.job.str().c_str());
  std::printf("submitted %s by %s@%s; owner %s; version %llu\n",
              clock_time(rec.submitted_ms).c_str(), rec.spec.user.c_str(),
              rec.spec.host.c_str(), rec.owner.str().c_str(),
              static_cast<unsigned long long>(rec.version));
  if (rec.state == job_state::queued)
    std::printf("why       %s\n", r->why.c_str());
  for (auto& a : rec.attempts)
    std::printf("attempt %d [%s] %s: %s; pid %d, max rss %lld KB, cpu %.2fs, %s → %s\n",
                a.number, a.id.str().c_str(), a.outcome.c_str(), a.cause.c_str(), a.pid,
                static_cast<long long>(a.max_rss_kb), a.cpu_s, clock_time(a.started_ms).c_str(),
                clock_time(a.ended_ms).c_str());
  for (auto& [k, v] : r->last_metrics)
    std::printf("metric    %s = %g\n", k.c_str(), v);
  return 0;
}

/// why and cancel: one text answer.
int run_text(context& ctx, verb v, const std::string& id) {
  auto c = ctx.connect();
  if (!c)
    return fail(c.error());
  auto r = (*c)->call<text_reply>(v, id_request{id});
  if (!r)
    return fail(std::string(to_string(v)) + ": " + r.error());
  std::printf("%s\n", r->text.c_str());
  return 0;
}

} // namespace

verb_def add_show(CLI::App& app) {
  auto id = std::make_shared<std::string>();
  auto* s = app.add_subcommand("show", "a job's record, attempts and last metrics");
  s->add_option("ID", *id, "job id (full or a unique suffix)")->required();
  return {s, [id](context& ctx) { return run_show(ctx, *id); }};
}

verb_def add_why(CLI::App& app) {
  auto id = std::make_shared<std::string>();
  auto* s = app.add_subcommand("why", "why a job waits (or how it ended)");
  s->add_option("ID", *id, "job id (full or a unique suffix)")->required();
  return {s, [id](context& ctx) { return run_text(ctx, verb::why, *id); }};
}

verb_def add_cancel(CLI::App& app) {
  auto id = std::make_shared<std::string>();
  auto* s = app.add_subcommand("cancel", "cancel a job");
  s->add_option("ID", *id, "job id (full or a unique suffix)")->required();
  return {s, [id](context& ctx) { return run_text(ctx, verb::cancel, *id); }};
}

} // namespace monkey::cli
