// SPDX-License-Identifier: Apache-2.0
// monkey reproduce ID [--wait] [--diff] [--dry-run]: runs a job again as it was recorded
// (its spec, parameters and seed), warning about every difference from what it ran with
// (code, versions, the app's build); with --wait, compares the new run's metrics with the
// original's (docs/reproduce.md).
#include "runtime/bin/cli/cli.hpp"

#include <cmath>
#include <iostream>
#include <thread>

#include "runtime/provenance.hpp"

namespace monkey::cli {

namespace {

struct reproduce_options {
  std::string id;
  bool wait = false;
  bool diff = false;
  bool dry_run = false;
};

/// Prints the diff stored in the cluster under `sha` (docs/reproduce.md), checked
/// against its hash.
int print_stored_diff(client& c, const std::string& sha) {
  ship_get_request req;
  req.sha256 = sha;
  std::string diff;
  for (;;) {
    auto r = c.call<ship_get_reply>(verb::ship_get, req, std::chrono::seconds(60));
    if (!r)
      return fail("reproduce: the uncommitted changes (diff " + sha.substr(0, 12)
                  + ") could not be read from the cluster: " + r.error());
    diff += r->data;
    req.offset += r->data.size();
    if (req.offset >= r->total || r->data.empty())
      break;
  }
  if (sha256_hex(diff) != sha)
    return fail("reproduce: the stored diff " + sha.substr(0, 12) + " came back corrupt "
                "(its SHA-256 differs)");
  std::cout << diff;
  return 0;
}

int run_reproduce(context& ctx, const reproduce_options& o) {
  auto c = ctx.connect();
  if (!c)
    return fail(c.error());
  auto orig = (*c)->call<show_reply>(verb::show, id_request{o.id});
  if (!orig)
    return fail("reproduce: " + orig.error());
  auto& rec = orig->record;
  auto& then = rec.spec.provenance;
  if (o.diff) {
    if (diff_is_stored(then))
      return print_stored_diff(**c, then.at("git_diff_sha256"));
    auto d = then.find("git_diff");
    if (d == then.end())
      return fail("reproduce: job " + rec.id.short_str() + " ran without uncommitted changes"
                  + (then.count("git_commit") ? " (commit " + then.at("git_commit") + ")"
                                               : std::string(" (not in a git tree)")));
    std::cout << d->second;
    if (then.count("git_diff_truncated"))
      std::fprintf(stderr, "monkey: reproduce: the diff was cut at %zu bytes when recorded\n",
                   max_recorded_diff);
    return 0;
  }
  if (rec.spec.driver)
    return fail("reproduce: job " + rec.id.short_str() + " is a sweep's driver: start the "
                "sweep file again (monkey sweep start), or reproduce one of its trials",
                exit_usage);
  std::vector<std::string> warnings;
  if (then.empty())
    warnings.push_back("the job recorded no provenance (submitted by an older monkey): its "
                       "code and versions cannot be compared");
  // A dry run records nothing: the diff of now is stored only for a job that runs.
  std::string unstored;
  auto now = o.dry_run ? collect_provenance(rec.spec.workdir, rec.spec.command, &unstored)
                       : job_provenance(ctx, rec.spec.workdir, rec.spec.command);
  const shipment* shipped_code = nullptr;
  for (auto& b : rec.spec.ship)
    if (b.kind == "workdir")
      shipped_code = &b;
  for (auto& w : provenance_changes(then, now)) {
    // A shipped working directory runs again as it was shipped (the same bundle): what the
    // directory holds now does not matter.
    if (shipped_code && w.rfind("code:", 0) == 0)
      continue;
    warnings.push_back(w);
  }
  if (shipped_code)
    for (auto* k : {"git_commit", "git_dirty", "git_diff", "git_diff_sha256", "git_diff_truncated",
                    "git_diff_stored"}) {
      if (auto it = then.find(k); it != then.end())
        now[k] = it->second;
      else
        now.erase(k);
    }
  job_spec spec = rec.spec;
  if (!spec.after.empty()) {
    warnings.push_back("its dependencies (--after) are left out: it runs at once");
    spec.after.clear();
  }
  if (!spec.checkpoint_from.empty()) {
    warnings.push_back("it started from job " + spec.checkpoint_from
                       + "'s checkpoint; the reproduction starts from it too");
  }
  for (auto& a : rec.attempts)
    if (a.resumed_step >= 0 && a.resumed_from == rec.id.str()) {
      warnings.push_back("its attempt " + std::to_string(a.number) + " resumed from its own "
                         "checkpoint (step " + std::to_string(a.resumed_step) + "): the "
                         "reproduction runs from the start");
      break;
    }
  // An app that split its work by measured speed recorded the split (`share` points): it
  // gets the same split again (fmnist's `shares`), or its results could not repeat.
  std::string replayed;
  if (!spec.app.empty() && !spec.params.count("shares")) {
    id_request q{rec.id.str()};
    q.metric = "share";
    if (auto shares = (*c)->call<show_reply>(verb::show, q); shares && !shares->series.empty()) {
      replayed = share_schedule_of(shares->series, spec.workers);
      if (!replayed.empty())
        spec.params["shares"] = replayed;
    }
  }
  auto old_build = spec.app_build;
  spec.app_build.clear(); // chosen again at submit: the nodes' build of the app now
  spec.extra_ranks = 0;   // set again at submit from the app's schema
  spec.sweep.clear();     // a trial run again stands alone
  spec.trial = -1;
  spec.array.clear();
  spec.name = (spec.name.empty() ? display_name(rec.spec) : spec.name) + "-repro";
  spec.has_seed = true; // the same seed, also when the original drew it
  spec.user = current_user();
  spec.host = current_host();
  spec.provenance = now;
  spec.provenance["reproduces"] = rec.id.str();
  if (!rec.attempts.empty())
    spec.provenance["original_node"] = rec.attempts.back().id.node.str();
  json out{{"original", rec.id.str()}};
  if (!replayed.empty()) {
    out["replayed_shares"] = replayed;
    std::fprintf(stderr, "monkey: reproduce: the workers get the shares of each batch the "
                         "original recorded (shares=%s)\n",
                 replayed.size() > 120 ? (replayed.substr(0, 117) + "...").c_str()
                                       : replayed.c_str());
  }
  if (o.dry_run) {
    for (auto& w : warnings)
      std::fprintf(stderr, "monkey: reproduce: warning: %s\n", w.c_str());
    std::printf("would run again: %s\n", submit_line(spec).c_str());
    return 0;
  }
  submit_request req;
  req.spec = spec;
  req.client_key = random_key();
  auto r = (*c)->call<submit_reply>(verb::submit, req);
  if (!r || r->ids.empty())
    return fail("reproduce: submit: " + (r ? std::string("no id in the answer") : r.error()));
  auto id = r->ids.front().str();
  auto fresh = (*c)->call<show_reply>(verb::show, id_request{id});
  if (fresh && !old_build.empty() && fresh->record.spec.app_build != old_build)
    warnings.push_back("the app " + spec.app + "'s build changed: " + old_build.substr(0, 12)
                       + " then, " + fresh->record.spec.app_build.substr(0, 12) + " now");
  for (auto& w : warnings)
    std::fprintf(stderr, "monkey: reproduce: warning: %s\n", w.c_str());
  out["id"] = id;
  out["warnings"] = warnings;
  if (!ctx.g.json)
    std::cout << id << "\n" << std::flush;
  if (!o.wait) {
    if (ctx.g.json)
      std::cout << out.dump() << "\n";
    return 0;
  }
  show_reply end;
  for (;;) {
    auto s = (*c)->call<show_reply>(verb::show, id_request{id});
    if (!s)
      return fail("reproduce: wait: " + s.error());
    if (is_final(s->record.state)) {
      end = *s;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  std::fprintf(stderr, "monkey: job %s %s — %s\n", id.c_str(), to_string(end.record.state),
               end.record.reason.c_str());
  // Metric by metric: the same series (every step's value) as the original's, or not.
  std::vector<std::string> same, differ;
  json metrics = json::object();
  for (auto& [key, stats] : orig->metric_history) {
    auto then_pts = metric_series(**c, rec.id.str(), key), now_pts = metric_series(**c, id, key);
    using points = std::vector<std::pair<int64_t, double>>;
    auto a = then_pts ? *then_pts : points{}, b = now_pts ? *now_pts : points{};
    bool equal = a.size() == b.size() && !a.empty();
    for (size_t i = 0; equal && i < a.size(); ++i)
      equal = a[i].first == b[i].first
              && (a[i].second == b[i].second
                  || (std::isnan(a[i].second) && std::isnan(b[i].second)));
    (equal ? same : differ).push_back(key);
    metrics[key] = {{"equal", equal}, {"points", a.size()}, {"points_now", b.size()}};
  }
  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (auto& k : v)
      s += (s.empty() ? "" : ", ") + k;
    return s;
  };
  if (!orig->metric_history.empty())
    std::fprintf(stderr, "metrics equal to %s's at every step: %s\nmetrics that differ: %s\n",
                 rec.id.short_str().c_str(), same.empty() ? "none" : list(same).c_str(),
                 differ.empty() ? "none" : list(differ).c_str());
  if (ctx.g.json) {
    out["state"] = to_string(end.record.state);
    out["metrics"] = metrics;
    std::cout << out.dump() << "\n";
  }
  return exit_code_of(end.record);
}

} // namespace

verb_def add_reproduce(CLI::App& app) {
  auto o = std::make_shared<reproduce_options>();
  auto* s = app.add_subcommand("reproduce", "run a job again as recorded (spec, parameters, "
                                            "seed), warning about what changed since");
  s->add_option("ID", o->id, "the job (its id, or a unique suffix)")->required();
  s->add_flag("--wait", o->wait, "wait for it, then compare its metrics with the original's "
                                 "step by step; exits with its exit code");
  s->add_flag("--diff", o->diff, "print the uncommitted changes it ran with (a patch), and "
                                 "run nothing");
  s->add_flag("--dry-run", o->dry_run, "show the warnings and what would run; submit nothing");
  return {s, [o](context& ctx) { return run_reproduce(ctx, *o); }};
}

} // namespace monkey::cli
