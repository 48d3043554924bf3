// SPDX-License-Identifier: Apache-2.0
// monkey tasks [list|submit|wait]: batches of built-in tasks (docs/tasks.md).
#include "runtime/bin/cli/cli.hpp"

#include <algorithm>
#include <iostream>

namespace monkey::cli {

namespace {

struct tasks_options {
  CLI::App* submit = nullptr;
  CLI::App* wait = nullptr;
  std::string kind = "noop", batch;
  uint64_t count = 1, arg = 0;
  int priority = 0;
  bool wait_flag = false;
  double timeout = -1;
  uint32_t limit = 0;
};

void print(const task_batch_status& b) {
  std::printf("%-10s %-10s %10llu %10llu %8llu  %-9s %s\n", b.id.short_str().c_str(),
              b.kind.c_str(), static_cast<unsigned long long>(b.count),
              static_cast<unsigned long long>(b.succeeded),
              static_cast<unsigned long long>(b.failed), b.finished_ms ? "done" : "running",
              b.first_failure.empty() ? "" : ("first failure: " + b.first_failure).c_str());
}

json as_json(const task_batch_status& b) {
  return json{{"id", b.id.str()},           {"kind", b.kind},
              {"arg", b.arg},               {"count", b.count},
              {"succeeded", b.succeeded},   {"failed", b.failed},
              {"submitted_ms", b.submitted_ms}, {"finished_ms", b.finished_ms},
              {"first_failure", b.first_failure}};
}

void header() {
  std::printf("%-10s %-10s %10s %10s %8s  %-9s\n", "BATCH", "KIND", "TASKS", "SUCCEEDED",
              "FAILED", "STATE");
}

expected<task_batch_status> wait_for(client& c, const std::string& id, double timeout_s) {
  auto deadline = std::chrono::steady_clock::now()
                  + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  for (;;) {
    uint32_t step = 20000;
    if (timeout_s >= 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
      step = static_cast<uint32_t>(std::clamp<int64_t>(left, 0, 20000));
    }
    auto r = c.call<task_batch_status>(verb::wait_tasks, wait_tasks_request{id, step},
                                       std::chrono::seconds(60));
    if (!r || r->finished_ms != 0 || (timeout_s >= 0 && step == 0))
      return r;
  }
}

int show_done(context& ctx, const task_batch_status& done, const std::string& id_line) {
  if (ctx.g.json) {
    std::cout << as_json(done).dump() << "\n";
  } else {
    header();
    print(done);
    if (!id_line.empty())
      std::cout << id_line << "\n";
  }
  return 0;
}

int run_tasks(context& ctx, const tasks_options& o) {
  auto conn = ctx.connect();
  if (!conn)
    return fail(conn.error());
  auto& c = **conn;
  if (o.submit->parsed()) {
    submit_tasks_request req;
    req.kind = o.kind;
    req.count = o.count;
    req.arg = o.arg;
    req.priority = o.priority;
    req.user = current_user();
    req.host = current_host();
    req.client_key = random_key();
    auto r = c.call<submit_tasks_reply>(verb::submit_tasks, req);
    if (!r)
      return fail("tasks submit: " + r.error());
    if (!o.wait_flag) {
      if (ctx.g.json)
        std::cout << json{{"id", r->id.str()}}.dump() << "\n";
      else
        std::cout << r->id.str() << "\n";
      return 0;
    }
    auto done = wait_for(c, r->id.str(), -1);
    if (!done)
      return fail("tasks wait: " + done.error());
    show_done(ctx, *done, r->id.str());
    return done->failed > 0 ? 1 : 0;
  }
  if (o.wait->parsed()) {
    auto done = wait_for(c, o.batch, o.timeout);
    if (!done)
      return fail("tasks wait: " + done.error());
    show_done(ctx, *done, "");
    if (done->finished_ms == 0)
      return exit_timed_out;
    return done->failed > 0 ? 1 : 0;
  }
  auto r = c.call<task_list_reply>(verb::list_tasks, list_request{"", o.limit});
  if (!r)
    return fail("tasks: " + r.error());
  if (ctx.g.json) {
    json out = json::array();
    for (auto& b : r->batches)
      out.push_back(as_json(b));
    std::cout << out.dump() << "\n";
    return 0;
  }
  header();
  for (auto& b : r->batches)
    print(b);
  return 0;
}

} // namespace

verb_def add_tasks(CLI::App& app) {
  auto o = std::make_shared<tasks_options>();
  auto* s = app.add_subcommand("tasks", "task batches: submit, list (default), wait");
  o->submit = s->add_subcommand("submit", "submit a batch of built-in tasks");
  auto* list = s->add_subcommand("list", "list task batches");
  o->wait = s->add_subcommand("wait", "wait until every task of a batch is final");
  o->submit->add_option("--kind", o->kind, "noop, sleep (arg: microseconds) or fail_every (arg: N)")
    ->capture_default_str();
  o->submit->add_option("--count", o->count, "tasks in the batch")->capture_default_str();
  o->submit->add_option("--arg", o->arg, "the argument every task of the batch gets");
  o->submit->add_option("--priority", o->priority, "higher runs first");
  o->submit->add_flag("--wait", o->wait_flag, "wait for the batch; exit 1 if a task failed");
  list->add_option("--limit", o->limit, "only the newest N");
  o->wait->add_option("ID", o->batch, "batch id (full or a unique suffix)")->required();
  o->wait->add_option("--timeout", o->timeout,
                      "give up after S seconds (0: print the progress now); exit 124 if not done");
  return {s, [o](context& ctx) { return run_tasks(ctx, *o); }};
}

} // namespace monkey::cli
