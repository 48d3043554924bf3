// SPDX-License-Identifier: Apache-2.0
// monkey logs ID [-f] [--err] [--attempt N] [--rank R]: a job's output, from the node that
// ran it (an app job's rank: that rank's log).
#include "runtime/bin/cli/cli.hpp"

#include <chrono>
#include <thread>

namespace monkey::cli {

namespace {

struct logs_options {
  std::string id;
  bool follow = false, err = false;
  int attempt = 0;
  int rank = -1;
};

int run_logs(context& ctx, const logs_options& o) {
  auto c = ctx.connect();
  if (!c)
    return fail(c.error());
  logs_request req;
  req.id = o.id;
  req.attempt = o.attempt;
  req.stream = o.err ? "err" : "out";
  req.rank = o.rank;
  for (;;) {
    auto r = (*c)->call<logs_reply>(verb::logs, req);
    if (!r)
      return fail("logs: " + r.error());
    std::fwrite(r->data.data(), 1, r->data.size(), stdout);
    std::fflush(stdout);
    req.offset = r->offset;
    if (req.attempt == 0 && r->attempt > 0)
      req.attempt = r->attempt;
    if (!r->data.empty())
      continue;
    if (!o.follow)
      break;
    if (r->finished && r->attempt < r->attempts && o.attempt == 0) {
      req.attempt = r->attempt + 1; // a retry started: follow it from its beginning
      req.offset = 0;
      continue;
    }
    if (r->finished && r->job_final)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return 0;
}

} // namespace

verb_def add_logs(CLI::App& app) {
  auto o = std::make_shared<logs_options>();
  auto* s = app.add_subcommand("logs", "a job's output");
  s->add_option("ID", o->id, "job id (full or a unique suffix)")->required();
  s->add_flag("-f,--follow", o->follow, "follow until the job ends");
  s->add_flag("--err", o->err, "stderr instead of stdout");
  s->add_option("--attempt", o->attempt, "attempt number (default: the latest)")
    ->check(whole_number(0, 1000000));
  s->add_option("--rank", o->rank, "an app job's rank: the log that rank wrote (context::log)")
    ->check(whole_number(0, 4095));
  return {s, [o](context& ctx) { return run_logs(ctx, *o); }};
}

} // namespace monkey::cli
