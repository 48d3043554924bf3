// SPDX-License-Identifier: Apache-2.0
// monkey submit [OPTIONS] -- CMD ARGS...   (or --file SPEC): a job, or an array of jobs.
#include "runtime/bin/cli/cli.hpp"

#include "runtime/provenance.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>
#include <unistd.h>

#include "runtime/spec_parser.hpp"

namespace monkey::cli {

namespace {

struct submit_options {
  std::string name, file, timeout, estimate, backoff, mem, gpu_mem, workdir, array, app_name, key;
  std::string checkpoint_from;
  int cpus = 1, gpus = 0, retries = 0, max_requeues = 5, priority = 0, workers = 1;
  uint64_t seed = 0;
  std::vector<std::string> sets, envs, afters, tags, ship_data;
  std::string ship_max;
  bool wait = false, ship_workdir = false;
};

/// The spec from --file, the flags given and the command after "--" (flags override the
/// file); or a usage failure naming the flag.
expected<job_spec> build_spec(const submit_options& o, const CLI::App& sub,
                              const std::vector<std::string>& command, ship_intent& ship) {
  job_spec spec;
  if (!o.file.empty()) {
    auto parsed = parse_spec_file(o.file, &ship);
    if (!parsed)
      return failure{parsed.error()};
    spec = *parsed;
  }
  auto given = [&](const char* flag) { return sub.count(flag) > 0; };
  if (!command.empty())
    spec.command = command;
  if (given("--app"))
    spec.app = o.app_name;
  if (given("--name"))
    spec.name = o.name;
  if (given("--cpus"))
    spec.cpus = o.cpus;
  if (given("--workers"))
    spec.workers = o.workers;
  if (given("--gpus"))
    spec.gpus = o.gpus;
  if (given("--retries"))
    spec.retries = o.retries;
  if (given("--max-requeues"))
    spec.max_requeues = o.max_requeues;
  if (given("--priority"))
    spec.priority = o.priority;
  if (given("--workdir"))
    spec.workdir = o.workdir;
  if (given("--array"))
    spec.array = o.array;
  if (given("--seed")) {
    spec.seed = o.seed;
    spec.has_seed = true;
  }
  if (given("--timeout")) {
    auto t = parse_duration_s(o.timeout);
    if (!t)
      return failure{"--timeout: " + t.error()};
    spec.timeout_s = *t;
  }
  if (given("--time-estimate")) {
    auto t = parse_duration_s(o.estimate);
    if (!t)
      return failure{"--time-estimate: " + t.error()};
    spec.time_estimate_s = *t;
  }
  if (given("--checkpoint-from"))
    spec.checkpoint_from = o.checkpoint_from;
  if (given("--retry-backoff")) {
    auto b = parse_backoff(o.backoff);
    if (!b)
      return failure{"--retry-backoff " + b.error()};
    spec.retry_backoff_s = b->first;
    spec.retry_backoff_max_s = b->second;
  }
  if (given("--mem")) {
    auto m = parse_memory_mb(o.mem);
    if (!m)
      return failure{"--mem: " + m.error()};
    spec.mem_mb = *m;
  }
  if (given("--gpu-mem")) {
    auto m = parse_memory_mb(o.gpu_mem);
    if (!m)
      return failure{"--gpu-mem: " + m.error()};
    spec.gpu_mem_mb = *m;
  }
  for (auto& t : o.tags)
    spec.tags.push_back(t);
  for (auto& kv : o.sets) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return failure{"--set " + kv + ": expected NAME=VALUE"};
    spec.params[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (auto& kv : o.envs) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return failure{"--env " + kv + ": expected NAME=VALUE"};
    spec.env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (auto& a : o.afters) {
    auto d = parse_dependency(a);
    if (!d)
      return failure{"--after: " + d.error()};
    spec.after.push_back(*d);
  }
  char cwd[4096];
  if (!spec.workdir.empty() && spec.workdir[0] != '/') {
    if (::getcwd(cwd, sizeof(cwd)))
      spec.workdir = std::string(cwd) + "/" + spec.workdir;
  } else if (spec.workdir.empty()) {
    if (::getcwd(cwd, sizeof(cwd)))
      spec.workdir = cwd;
  }
  spec.user = current_user();
  spec.host = current_host();
  if (auto problem = validate(spec); !problem)
    return failure{"invalid job: " + problem.error()};
  return spec;
}

/// `--wait`: one line on stderr saying how the job ended, as `show` does (its state and the
/// record's reason: the last attempt and its cause, or why it never ran), so that a
/// mistyped program or a timeout is not silent.
void say_how_it_ended(const job_record& rec) {
  std::fprintf(stderr, "monkey: job %s %s — %s\n", rec.id.str().c_str(), to_string(rec.state),
               rec.reason.c_str());
}

/// `--after` takes a unique suffix of a job id, as every verb does: each suffix is resolved
/// to the full id through `show`, which finds the job wherever the cluster holds it.
expected<std::vector<std::string>> resolve_afters(context& ctx,
                                                  const std::vector<std::string>& afters) {
  std::vector<std::string> out;
  for (auto& a : afters) {
    auto colon = a.find(':');
    auto kind = colon == std::string::npos ? std::string{} : a.substr(0, colon + 1);
    auto id = colon == std::string::npos ? a : a.substr(colon + 1);
    if (id.empty() || job_id::parse(id)) {
      out.push_back(a); // a full id (or none: build_spec names the problem)
      continue;
    }
    auto c = ctx.connect();
    if (!c)
      return failure{c.error()};
    auto s = (*c)->call<show_reply>(verb::show, id_request{id});
    if (!s)
      return failure{"--after " + a + ": " + s.error()};
    out.push_back(kind + s->record.id.str());
  }
  return out;
}

/// A job that no alive member has room for is accepted and waits queued (such a node may
/// join): say so at once rather than let it wait silently.
void warn_if_no_room(client& c, const job_spec& spec, const std::vector<job_id>& ids) {
  auto n = c.call<nodes_reply>(verb::nodes, std::string{});
  if (!n || ids.empty())
    return;
  int32_t most_cpus = 0, most_gpus = 0;
  int64_t room = 0; // workers of this size the alive members hold at once, all idle
  bool fits_one = false;
  for (auto& m : n->members) {
    if (m.state != member_state::alive)
      continue;
    most_cpus = std::max(most_cpus, m.cpus);
    most_gpus = std::max(most_gpus, m.gpus);
    if (m.cpus < spec.cpus || m.gpus < spec.gpus)
      continue;
    fits_one = true;
    int64_t by_cpus = spec.cpus > 0 ? m.cpus / spec.cpus : spec.ranks();
    int64_t by_gpus = spec.gpus > 0 ? m.gpus / spec.gpus : by_cpus;
    room += std::min(by_cpus, by_gpus);
  }
  if (fits_one) {
    // A job of several workers starts only when all of them have room at once.
    if (spec.ranks() > 1 && room < spec.ranks())
      std::fprintf(stderr,
                   "monkey: warning: %d workers of %d cpus%s: the alive nodes have room for %lld "
                   "at once, even idle: the job%s wait%s queued until more nodes join (monkey "
                   "why %s)\n",
                   spec.ranks(), spec.cpus,
                   spec.gpus > 0 ? (" and " + std::to_string(spec.gpus) + " gpus").c_str() : "",
                   static_cast<long long>(room), ids.size() > 1 ? "s" : "",
                   ids.size() > 1 ? "" : "s", ids.front().short_str().c_str());
    return;
  }
  std::string need = std::to_string(spec.cpus) + " cpus"
                     + (spec.gpus > 0 ? " and " + std::to_string(spec.gpus) + " gpus" : "");
  std::fprintf(stderr,
               "monkey: warning: no alive node has %s (the largest has %d cpus, %d gpus): the "
               "job%s wait%s queued until such a node joins (monkey why %s)\n",
               need.c_str(), most_cpus, most_gpus, ids.size() > 1 ? "s" : "",
               ids.size() > 1 ? "" : "s", ids.front().short_str().c_str());
}

/// `--checkpoint-from` takes a unique suffix too; the job must exist in the cluster (a
/// typo would otherwise start the new job from scratch without a word).
expected<std::string> resolve_checkpoint_from(context& ctx, const std::string& from) {
  if (from.empty())
    return from;
  auto c = ctx.connect();
  if (!c)
    return failure{c.error()};
  auto s = (*c)->call<show_reply>(verb::show, id_request{from});
  if (!s)
    return failure{"--checkpoint-from " + from + ": " + s.error()};
  return s->record.id.str();
}

int run_submit(context& ctx, const submit_options& given, const CLI::App& sub) {
  auto afters = resolve_afters(ctx, given.afters);
  if (!afters)
    return fail(afters.error());
  submit_options o = given;
  o.afters = std::move(*afters);
  if (sub.count("--checkpoint-from")) {
    auto from = resolve_checkpoint_from(ctx, o.checkpoint_from);
    if (!from)
      return fail(from.error(), exit_usage);
    o.checkpoint_from = *from;
  }
  ship_intent intent;
  auto spec = build_spec(o, sub, ctx.command, intent);
  if (!spec)
    return fail(spec.error(), exit_usage);
  ship_request what;
  what.workdir = intent.workdir || o.ship_workdir;
  what.data = intent.data;
  what.data.insert(what.data.end(), o.ship_data.begin(), o.ship_data.end());
  if (sub.count("--ship-max")) {
    auto mb = parse_memory_mb(o.ship_max);
    if (!mb)
      return fail("--ship-max: " + mb.error(), exit_usage);
    what.max_workdir = what.max_data = static_cast<uint64_t>(*mb) << 20;
  }
  if ((what.workdir || !what.data.empty()) && !spec->app.empty())
    return fail("--ship-workdir/--ship-data: apps are installed on each node (--app-dir); "
                "shipping is for command jobs",
                exit_usage);
  auto shipped = ship_files(ctx, spec->workdir, what);
  if (!shipped)
    return fail(shipped.error());
  spec->ship = std::move(*shipped);
  spec->provenance = job_provenance(ctx, spec->workdir, spec->command);
  auto c = ctx.connect();
  if (!c)
    return fail(c.error());
  submit_request req;
  req.spec = *spec;
  req.client_key = o.key.empty() ? random_key() : o.key;
  auto r = (*c)->call<submit_reply>(verb::submit, req);
  if (!r)
    return fail("submit: " + r.error());
  if (ctx.g.json) {
    json ids = json::array();
    for (auto& id : r->ids)
      ids.push_back(id.str());
    std::cout << json{{"ids", ids}}.dump() << "\n";
  } else {
    if (r->ids.size() > 1)
      std::cout << "submitted " << r->ids.size() << " jobs\n";
    for (auto& id : r->ids)
      std::cout << id.str() << "\n";
  }
  std::cout.flush();
  warn_if_no_room(**c, *spec, r->ids);
  if (!o.wait)
    return 0;
  int worst = 0;
  for (auto& id : r->ids) {
    for (;;) {
      auto s = (*c)->call<show_reply>(verb::show, id_request{id.str()});
      if (!s)
        return fail("wait: " + s.error());
      if (is_final(s->record.state)) {
        say_how_it_ended(s->record);
        worst = std::max(worst, exit_code_of(s->record));
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  return worst;
}

} // namespace

verb_def add_submit(CLI::App& app) {
  auto o = std::make_shared<submit_options>();
  auto* s = app.add_subcommand("submit", "submit a job: monkey submit [OPTIONS] -- CMD ARGS...");
  s->add_option("--name", o->name, "job name");
  s->add_option("--file", o->file, "YAML or JSON spec file (flags override it)");
  s->add_option("--app", o->app_name,
                "an actor app instead of a command (monkey-app-NAME in a node's --app-dir)");
  s->add_option("--workers", o->workers,
                "ranks: an app's, or N copies of the command with torchrun's RANK, WORLD_SIZE, "
                "MASTER_ADDR, ... (cpus, gpus and mem are per worker)")
    ->check(whole_number(1, 4096));
  s->add_option("--cpus", o->cpus, "CPUs (per worker)")->check(whole_number(1, 4096));
  s->add_option("--gpus", o->gpus, "whole GPUs (per worker)")->check(whole_number(0, 64));
  s->add_option("--gpu-mem", o->gpu_mem, "memory per GPU, e.g. 8G");
  s->add_option("--mem", o->mem, "memory, e.g. 512M");
  s->add_option("--tag", o->tags, "required node tag (repeatable)");
  s->add_option("--retries", o->retries, "more attempts after the job fails")
    ->check(whole_number(0, 1000));
  s->add_option("--retry-backoff", o->backoff,
                "wait before each retry: FIRST..MOST doubling, e.g. 1s..1m (the default), 5s, "
                "or 0 for none");
  s->add_option("--max-requeues", o->max_requeues, "attempts lost to node crashes that are requeued")
    ->check(whole_number(0, 1000));
  s->add_option("--timeout", o->timeout, "time limit per attempt, e.g. 90s, 10m, 2h");
  s->add_option("--time-estimate", o->estimate,
                "how long an attempt is expected to run, for backfill only (nothing is "
                "stopped at it; without it or --timeout the job is never backfilled), e.g. 10m");
  s->add_option("--checkpoint-from", o->checkpoint_from,
                "start from this job's newest checkpoint while this job has none of its own; "
                "ID a unique suffix of 6 or more (docs/checkpoints.md)");
  s->add_option("--priority", o->priority, "higher runs first");
  s->add_option("--workdir", o->workdir, "working directory");
  s->add_option("--env", o->envs, "NAME=VALUE (repeatable)");
  s->add_option("--seed", o->seed, "random seed (MONKEY_SEED)");
  s->add_option("--set", o->sets,
                "parameter NAME=VALUE (repeatable); an app checks them against its schema "
                "(monkey-app-NAME --describe)");
  s->add_option("--after", o->afters,
                "ok:ID or any:ID, ID a unique suffix of 6 or more (repeatable)");
  s->add_option("--array", o->array, "array of jobs, e.g. 0-99, 1,3,5 or 0-99:10");
  s->add_flag("--ship-workdir", o->ship_workdir,
              "ship the working directory to the node that runs the job (a git tree: its "
              "files with uncommitted changes, not ignored ones; else the directory); the job "
              "runs in a copy (docs/shipping.md)");
  s->add_option("--ship-data", o->ship_data,
                "ship this file or folder too (repeatable): a relative PATH lands at PATH in "
                "the shipped working directory, others in $MONKEY_DATA_DIR/NAME");
  s->add_option("--ship-max", o->ship_max,
                "the largest bundle to ship, e.g. 500M (default: 100M for the working "
                "directory, 4G for data)");
  s->add_flag("--wait", o->wait,
              "wait for the job, say how it ended (stderr) and exit with its exit code");
  s->add_option("--key", o->key,
                "idempotency key: submitting again with the same key (after an error or a lost "
                "answer) creates nothing new and returns the same ids (default: a new key)");
  return {s, [o, s](context& ctx) { return run_submit(ctx, *o, *s); }, true};
}

} // namespace monkey::cli
