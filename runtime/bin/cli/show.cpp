// SPDX-License-Identifier: Apache-2.0
// monkey show ID and monkey why ID: a job's record, wherever in the cluster it is.
#include "runtime/bin/cli/cli.hpp"

#include "runtime/ship/bundle.hpp"

#include <algorithm>
#include <iostream>
#include <map>

namespace monkey::cli {

namespace {

/// After `show --metric KEY`'s series: each rank's summary, and which point the job's
/// "last" value (what `show` and `jobs` print) is: the newest one written, of any rank.
void print_rank_summary(const std::vector<metric_point>& series) {
  struct summary {
    int64_t count = 0;
    double first = 0, min = 0, max = 0;
    const metric_point* last = nullptr;
  };
  std::map<int32_t, summary> ranks;
  const metric_point* newest = nullptr;
  for (auto& p : series) {
    auto& s = ranks[p.rank];
    if (s.count++ == 0)
      s.first = s.min = s.max = p.value;
    s.min = std::min(s.min, p.value);
    s.max = std::max(s.max, p.value);
    if (!s.last || p.ts_ms >= s.last->ts_ms)
      s.last = &p;
    if (!newest || p.ts_ms >= newest->ts_ms)
      newest = &p;
  }
  std::printf("\n");
  for (auto& [rank, s] : ranks)
    std::printf("rank %-3d  %lld points; first %.6g, min %.6g, max %.6g, last %.6g (step %lld, "
                "attempt %d)\n",
                rank, static_cast<long long>(s.count), s.first, s.min, s.max, s.last->value,
                static_cast<long long>(s.last->step), s.last->attempt);
  if (newest)
    std::printf("last      %.6g is rank %d's (step %lld, attempt %d): the newest point of any "
                "rank\n",
                newest->value, newest->rank, static_cast<long long>(newest->step),
                newest->attempt);
}

int run_show(context& ctx, const std::string& id, const std::string& metric) {
  auto c = ctx.connect();
  if (!c)
    return fail(c.error());
  id_request req{id};
  req.metric = metric;
  auto r = (*c)->call<show_reply>(verb::show, req);
  if (!r)
    return fail("show: " + r.error());
  if (ctx.g.json) {
    std::cout << to_json(*r).dump(2) << "\n";
    return 0;
  }
  auto& rec = r->record;
  if (!metric.empty()) { // `show --metric KEY`: the series, one point a line
    if (r->series.empty()) {
      std::string keys;
      for (auto& [k, s] : r->metric_history)
        keys += (keys.empty() ? "" : ", ") + k;
      return fail("show: job " + rec.id.short_str() + " has no metric '" + metric + "'"
                  + (keys.empty() ? " (it has no metrics)" : " (it has: " + keys + ")"));
    }
    std::printf("%-8s  %-5s  %-8s  %-19s  %s\n", "STEP", "RANK", "ATTEMPT", "TIME",
                metric.c_str());
    for (auto& p : r->series)
      std::printf("%-8lld  %-5d  %-8d  %-19s  %.9g\n", static_cast<long long>(p.step), p.rank,
                  p.attempt, clock_time(p.ts_ms).c_str(), p.value);
    print_rank_summary(r->series);
    return 0;
  }
  auto names = node_names(ctx);
  std::printf("job       %s (%s)\n", rec.id.str().c_str(), display_name(rec.spec).c_str());
  std::printf("state     %s — %s\n", to_string(rec.state), rec.reason.c_str());
  std::printf("command   %s\n",
              rec.spec.app.empty() ? command_line(rec.spec).c_str()
                                   : ("app " + rec.spec.app + " (build " + rec.spec.app_build
                                      + "), " + workers_text(rec.spec))
                                       .c_str());
  for (auto& [k, v] : rec.spec.params)
    std::printf("param     %s=%s\n", k.c_str(), v.c_str());
  std::printf("resources cpus=%d gpus=%d mem=%lldMB%s\n", rec.spec.cpus, rec.spec.gpus,
              static_cast<long long>(rec.spec.mem_mb),
              rec.spec.ranks() > 1 ? " per rank" : "");
  char backoff[64] = "none";
  if (rec.spec.retry_backoff_s > 0)
    std::snprintf(backoff, sizeof(backoff), "%gs..%gs", rec.spec.retry_backoff_s,
                  std::max(rec.spec.retry_backoff_s, rec.spec.retry_backoff_max_s));
  std::printf("retries   %d/%d used (backoff %s), requeues %d/%d used, timeout %s, priority %d, "
              "seed %llu\n",
              rec.retries_used, rec.spec.retries, backoff, rec.requeues_used, rec.spec.max_requeues,
              rec.spec.timeout_s > 0 ? (std::to_string(rec.spec.timeout_s) + "s").c_str()
                                     : "none",
              rec.spec.priority, static_cast<unsigned long long>(rec.spec.seed));
  for (auto& d : rec.spec.after)
    std::printf("after     %s:%s\n", d.kind.c_str(), d.job.str().c_str());
  if (!rec.spec.sweep.empty())
    std::printf("sweep     %s, trial %d\n", rec.spec.sweep.c_str(), rec.spec.trial);
  if (auto& p = rec.spec.provenance; !p.empty()) {
    auto get = [&](const char* k) { return p.count(k) ? p.at(k) : std::string{}; };
    std::string code = get("git_commit").empty()
                         ? "not in a git tree"
                         : "commit " + get("git_commit").substr(0, 12)
                             + (get("git_dirty") == "yes"
                                  ? " + uncommitted changes (diff sha256 "
                                      + get("git_diff_sha256").substr(0, 12)
                                      + "; monkey reproduce ID --diff)"
                                  : "");
    std::printf("code      %s; monkey %s%s%s\n", code.c_str(), get("monkey_version").c_str(),
                get("python").empty() ? "" : ("; " + get("python")).c_str(),
                get("reproduces").empty() ? "" : ("; reproduces " + get("reproduces")).c_str());
  }
  for (auto& b : rec.spec.ship)
    std::printf("shipped   %s %s: bundle %s (%lld files, %s) → $MONKEY_SCRATCH_DIR/%s%s\n",
                b.kind.c_str(), b.source.c_str(), b.sha256.substr(0, 12).c_str(),
                static_cast<long long>(b.files), ship::human_bytes(b.bytes).c_str(),
                b.into.c_str(), b.cwd.empty() ? "" : (" (runs in " + b.into + "/" + b.cwd + ")").c_str());
  std::string holders;
  for (auto& h : rec.replicas)
    holders += (holders.empty() ? "" : ", ") + name_of(names, h);
  std::printf("submitted %s by %s@%s; owner %s; holders %s; version %llu\n",
              clock_time(rec.submitted_ms).c_str(), rec.spec.user.c_str(),
              rec.spec.host.c_str(), name_of(names, rec.owner.str()).c_str(), holders.c_str(),
              static_cast<unsigned long long>(rec.version));
  if (rec.state == job_state::queued)
    std::printf("why       %s\n", r->why.c_str());
  for (auto& a : rec.attempts) {
    // A running attempt has no cause yet: say where and since when it runs instead.
    auto what = a.cause.empty() ? std::string(a.outcome == "running" ? "since " : "")
                                    + clock_time(a.started_ms)
                                : a.cause;
    // A gang across nodes has no process of its own on its owner: no pid to show. A
    // sweep's driver runs as an actor in its node: no process at all.
    auto pid = a.pid > 0 ? "pid " + std::to_string(a.pid) + ", " : std::string{};
    char usage[96] = "";
    if (rec.spec.driver)
      std::snprintf(usage, sizeof(usage), "optimizer actor in the node");
    else
      std::snprintf(usage, sizeof(usage), "max rss %lld KB, cpu %.2fs",
                    static_cast<long long>(a.max_rss_kb), a.cpu_s);
    std::printf("attempt %d on %s [%s] %s: %s; %s%s, %s → %s\n", a.number,
                name_of(names, a.id.node.str()).c_str(), a.id.str().c_str(), a.outcome.c_str(),
                what.c_str(), pid.c_str(), usage, clock_time(a.started_ms).c_str(),
                clock_time(a.ended_ms).c_str());
    if (a.resumed_step >= 0)
      std::printf("  resumed from checkpoint step %lld%s\n", static_cast<long long>(a.resumed_step),
                  a.resumed_from == rec.id.str() ? ""
                                                 : (" of job " + a.resumed_from).c_str());
    for (auto& h : a.hosts) { // "NODE:0-3": that node's app host runs ranks 0 to 3
      auto colon = h.rfind(':');
      std::printf("  ranks %s on %s\n", h.substr(colon + 1).c_str(),
                  name_of(names, h.substr(0, colon)).c_str());
    }
  }
  for (auto& [k, s] : r->metric_history)
    std::printf("metric    %s: last %.6g (%lld points; first %.6g, min %.6g, max %.6g)\n",
                k.c_str(), s.last, static_cast<long long>(s.count), s.first, s.min, s.max);
  if (r->metric_history.empty())
    for (auto& [k, v] : r->last_metrics) // an older node answered: last values only
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
  auto metric = std::make_shared<std::string>();
  auto* s = app.add_subcommand("show", "a job's record, attempts and metrics (count, first, "
                                       "min, max, last of each)");
  s->add_option("ID", *id, "job id (full or a unique suffix)")->required();
  s->add_option("--metric", *metric, "print this metric's series, one point a line, then a "
                                     "summary per rank and which rank the last value is from");
  return {s, [id, metric](context& ctx) { return run_show(ctx, *id, *metric); }};
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
