// SPDX-License-Identifier: Apache-2.0
// monkey jobs [--state S] [--limit N]: one row per job of the cluster.
#include "runtime/bin/cli/cli.hpp"

#include <iostream>

namespace monkey::cli {

namespace {

struct jobs_options {
  std::string state;
  uint32_t limit = 0;
};

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (auto& s : v)
    out += (out.empty() ? "" : ", ") + s;
  return out;
}

int run_jobs(context& ctx, const jobs_options& o) {
  auto c = ctx.connect();
  if (!c)
    return fail(c.error());
  auto r = (*c)->call<list_reply>(verb::list, list_request{o.state, o.limit});
  if (!r)
    return fail("jobs: " + r.error());
  if (!r->unreachable.empty())
    std::fprintf(stderr, "monkey: jobs: partial list: no answer from %s\n",
                 joined(r->unreachable).c_str());
  if (!r->dead.empty())
    std::fprintf(stderr,
                 "monkey: jobs: %zu dead member%s (%s): jobs held only by %s are not shown\n",
                 r->dead.size(), r->dead.size() == 1 ? "" : "s", joined(r->dead).c_str(),
                 r->dead.size() == 1 ? "it" : "them");
  if (ctx.g.json) {
    json out = json::array();
    for (auto& j : r->jobs)
      out.push_back(to_json(j));
    std::cout << out.dump() << "\n";
    return 0;
  }
  std::printf("%-10s  %-24s  %-9s  %3s  %4s  %4s  %5s  %-8s  %s\n", "ID", "NAME", "STATE", "ATT",
              "PRIO", "EXIT", "AGE", "NODE", "REASON");
  for (auto& j : r->jobs)
    std::printf("%-10s  %-24.24s  %-9s  %3d  %4d  %4s  %5s  %-8.8s  %s\n",
                j.id.short_str().c_str(), j.name.c_str(),
                j.unavailable ? "unavailable" : to_string(j.state), j.attempts, j.priority,
                j.exit_code < 0 ? "-" : std::to_string(j.exit_code).c_str(),
                age(j.submitted_ms).c_str(), (j.ran_on.empty() ? j.owner : j.ran_on).c_str(),
                j.reason.c_str());
  return 0;
}

} // namespace

verb_def add_jobs(CLI::App& app) {
  auto o = std::make_shared<jobs_options>();
  auto* s = app.add_subcommand("jobs", "list the jobs of the cluster");
  s->add_option("--state", o->state, "only jobs in this state");
  s->add_option("--limit", o->limit, "only the newest N");
  return {s, [o](context& ctx) { return run_jobs(ctx, *o); }};
}

} // namespace monkey::cli
