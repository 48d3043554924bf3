// SPDX-License-Identifier: Apache-2.0
// monkey rm ID... | monkey rm --older-than 7d [--state S]: delete finished jobs, with their
// logs and metrics, from every member (each keeps a tombstone so no copy brings them back).
#include "runtime/bin/cli/cli.hpp"

#include <iostream>

#include "runtime/spec_parser.hpp"

namespace monkey::cli {

namespace {

struct rm_options {
  std::vector<std::string> ids;
  std::string older_than;
  std::string state;
  bool dry_run = false;
};

int run_rm(context& ctx, const rm_options& o) {
  if (o.ids.empty() == o.older_than.empty())
    return fail("rm: give job ids, or --older-than AGE (e.g. 7d), not both", exit_usage);
  if (!o.state.empty() && o.older_than.empty())
    return fail("rm: --state goes with --older-than", exit_usage);
  auto c = ctx.connect();
  if (!c)
    return fail(c.error());
  std::vector<job_id> ids;
  std::vector<std::string> problems;
  if (!o.older_than.empty()) {
    auto age = parse_duration_s(o.older_than);
    if (!age)
      return fail("rm: --older-than " + o.older_than + ": " + age.error(), exit_usage);
    auto cutoff = now_ms() - static_cast<int64_t>(*age * 1000);
    auto r = (*c)->call<list_reply>(verb::list, list_request{o.state, 0});
    if (!r)
      return fail("rm: " + r.error());
    for (auto& j : r->jobs)
      if (j.final && !j.unavailable && j.updated_ms < cutoff)
        ids.push_back(j.id);
  } else {
    for (auto& text : o.ids) {
      auto s = (*c)->call<show_reply>(verb::show, id_request{text});
      if (!s) {
        problems.push_back(s.error());
        continue;
      }
      if (!is_final(s->record.state)) {
        problems.push_back("job " + s->record.id.short_str() + " is "
                           + to_string(s->record.state) + ": cancel it first (monkey cancel "
                           + s->record.id.short_str() + ")");
        continue;
      }
      ids.push_back(s->record.id);
    }
  }
  for (auto& p : problems)
    std::fprintf(stderr, "monkey: rm: %s\n", p.c_str());
  if (ids.empty()) {
    if (problems.empty())
      std::printf("no finished job %s\n",
                  o.older_than.empty() ? "to remove" : ("older than " + o.older_than).c_str());
    return problems.empty() ? 0 : 1;
  }
  if (o.dry_run) {
    for (auto& id : ids)
      std::printf("%s\n", id.str().c_str());
    std::printf("%zu jobs would be removed (--dry-run)\n", ids.size());
    return problems.empty() ? 0 : 1;
  }
  auto r = (*c)->call<remove_reply>(verb::remove, remove_request{ids});
  if (!r)
    return fail("rm: " + r.error());
  for (auto& why : r->refused)
    std::fprintf(stderr, "monkey: rm: kept %s\n", why.c_str());
  if (ctx.g.json) {
    json removed = json::array();
    for (auto& id : r->removed)
      removed.push_back(id.str());
    std::cout << json{{"removed", removed}, {"refused", r->refused}, {"unreached", r->unreached}}
                   .dump()
              << "\n";
  } else {
    std::printf("removed %zu job%s with their logs and metrics\n", r->removed.size(),
                r->removed.size() == 1 ? "" : "s");
    if (!r->unreached.empty()) {
      std::string list;
      for (auto& n : r->unreached)
        list += (list.empty() ? "" : ", ") + n;
      std::printf("not reached: %s; they remove their copies when they return (a member with "
                  "the tombstone tells them)\n",
                  list.c_str());
    }
  }
  return problems.empty() && r->refused.empty() ? 0 : 1;
}

} // namespace

verb_def add_rm(CLI::App& app) {
  auto o = std::make_shared<rm_options>();
  auto* s = app.add_subcommand("rm", "delete finished jobs with their logs and metrics, on every "
                                     "node (monkey rm ID... or --older-than 7d)");
  s->add_option("ID", o->ids, "job ids (full or unique suffixes); the jobs must have ended");
  s->add_option("--older-than", o->older_than,
                "every finished job that ended longer ago than this, e.g. 12h, 7d");
  s->add_option("--state", o->state, "with --older-than: only jobs in this state, e.g. failed");
  s->add_flag("--dry-run", o->dry_run, "list what would be removed, remove nothing");
  return {s, [o](context& ctx) { return run_rm(ctx, *o); }};
}

} // namespace monkey::cli
