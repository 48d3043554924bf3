// SPDX-License-Identifier: Apache-2.0
// monkey: the command line of a Monkey cluster (submit, jobs, status, show, logs, cancel,
// why, devices, nodes, tree, kill, console). Errors go to stderr; --json on every listing
// verb. The console runs the same commands over one connection (see console.cpp).

#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "runtime/auth.hpp"
#include "runtime/bin/console.hpp"
#include "runtime/bin/up.hpp"
#include "runtime/certs.hpp"
#include "runtime/client.hpp"
#include "runtime/spec_parser.hpp"
#include "runtime/supervisor.hpp"

using namespace monkey;
using json = nlohmann::json;

namespace {

// Exit codes of `submit --wait` for outcomes that are not the job's own exit code.
constexpr int exit_usage = 2;
constexpr int exit_lost = 123;
constexpr int exit_timed_out = 124;
constexpr int exit_cancelled = 125;

int fail(const std::string& msg, int code = 1) {
  std::fprintf(stderr, "monkey: %s\n", msg.c_str());
  return code;
}

std::string age(int64_t ms) {
  auto s = (now_ms() - ms) / 1000;
  if (s < 60)
    return std::to_string(s) + "s";
  if (s < 3600)
    return std::to_string(s / 60) + "m";
  if (s < 86400)
    return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
}

std::string clock_time(int64_t ms) {
  if (ms <= 0)
    return "-";
  time_t t = ms / 1000;
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  return buf;
}

json to_json(const job_summary& s) {
  return {{"id", s.id.str()},         {"name", s.name},
          {"state", s.unavailable ? "unavailable" : to_string(s.state)},
          {"attempts", s.attempts},   {"holders", s.holders},
          {"priority", s.priority},   {"cpus", s.cpus},
          {"gpus", s.gpus},           {"submitted_ms", s.submitted_ms},
          {"updated_ms", s.updated_ms}, {"exit_code", s.exit_code},
          {"reason", s.reason},       {"owner", s.owner},
          {"ran_on", s.ran_on},       {"version", s.version}};
}

json to_json(const attempt_record& a) {
  return {{"number", a.number},       {"attempt_id", a.id.str()}, {"outcome", a.outcome},
          {"cause", a.cause},         {"started_ms", a.started_ms}, {"ended_ms", a.ended_ms},
          {"pid", a.pid},             {"pgid", a.pgid},           {"exit_code", a.exit_code},
          {"signal", a.term_signal},  {"max_rss_kb", a.max_rss_kb}, {"cpu_s", a.cpu_s},
          {"log_out", a.log_out},     {"log_err", a.log_err}};
}

json to_json(const show_reply& r) {
  auto& rec = r.record;
  json attempts = json::array();
  for (auto& a : rec.attempts)
    attempts.push_back(to_json(a));
  json deps = json::array();
  for (auto& d : rec.spec.after)
    deps.push_back(d.kind + ":" + d.job.str());
  return {{"id", rec.id.str()},
          {"name", display_name(rec.spec)},
          {"state", to_string(rec.state)},
          {"reason", rec.reason},
          {"version", rec.version},
          {"owner", rec.owner.str()},
          {"replicas", rec.replicas},
          {"user", rec.spec.user},
          {"host", rec.spec.host},
          {"command", rec.spec.command},
          {"app", rec.spec.app},
          {"params", rec.spec.params},
          {"cpus", rec.spec.cpus},
          {"gpus", rec.spec.gpus},
          {"mem_mb", rec.spec.mem_mb},
          {"retries", rec.spec.retries},
          {"retries_used", rec.retries_used},
          {"max_requeues", rec.spec.max_requeues},
          {"requeues_used", rec.requeues_used},
          {"timeout_s", rec.spec.timeout_s},
          {"priority", rec.spec.priority},
          {"seed", rec.spec.seed},
          {"array_index", rec.spec.array_index},
          {"after", deps},
          {"submitted_ms", rec.submitted_ms},
          {"updated_ms", rec.updated_ms},
          {"attempts", attempts},
          {"metrics", r.last_metrics},
          {"why", r.why}};
}

json to_json(const status_reply& s) {
  json devs = json::array();
  for (auto& d : s.devices)
    devs.push_back({{"name", d.name},   {"kind", d.kind},
                    {"model", d.model}, {"slots", d.slots},
                    {"free_slots", d.free_slots}, {"memory_mb", d.memory_mb},
                    {"gflops", d.gflops}});
  return {{"node", s.node},           {"incarnation", s.incarnation}, {"address", s.address},
          {"pid", s.pid},             {"started_ms", s.started_ms},   {"version", s.version},
          {"accepting", s.accepting}, {"jobs", s.jobs_by_state},      {"cpus_total", s.cpus_total},
          {"cpus_free", s.cpus_free}, {"gpus_total", s.gpus_total},   {"gpus_free", s.gpus_free},
          {"mem_total_mb", s.mem_total_mb}, {"mem_free_mb", s.mem_free_mb}, {"devices", devs}};
}

struct globals {
  std::string address;
  std::string secret_file;
  std::string tls_dir;
  bool json = false;
};

expected<std::unique_ptr<client>> open_client(const globals& g) {
  auto secret_path = find_secret_file(g.secret_file);
  auto secret = load_secret(secret_path, false);
  if (!secret)
    return failure{secret.error()};
  return client::connect(find_addresses(g.address), *secret, find_tls_files(g.tls_dir));
}

int exit_code_of(const job_record& rec) {
  switch (rec.state) {
    case job_state::succeeded: return 0;
    case job_state::cancelled: return exit_cancelled;
    case job_state::timed_out: return exit_timed_out;
    case job_state::lost: return exit_lost;
    default: break;
  }
  if (rec.attempts.empty())
    return 1;
  auto& a = rec.attempts.back();
  if (a.term_signal > 0)
    return 128 + a.term_signal;
  return a.exit_code > 0 ? a.exit_code : 1;
}

} // namespace

/// One command line (argv[0] is the program name). `shared` is the console's connection;
/// without it the command connects by itself.
int run_cli(int argc, char** argv, client* shared) {
  // Everything after the first "--" is the job's command, untouched by option parsing.
  std::vector<std::string> command;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      for (int j = i + 1; j < argc; ++j)
        command.push_back(argv[j]);
      break;
    }
    args.push_back(argv[i]);
  }

  globals g;
  CLI::App app{"monkey: run and watch jobs on a Monkey cluster"};
  app.require_subcommand(1);
  app.fallthrough(true); // --address, --secret-file and --json also after the verb
  app.add_option("--address", g.address, "node HOST:PORT (else MONKEY_ADDRESS, the cluster file, localhost:4700)");
  app.add_option("--secret-file", g.secret_file, "cluster secret (else MONKEY_SECRET_FILE, MONKEY_HOME/secret)");
  app.add_flag("--json", g.json, "machine-readable output");
  app.add_option("--tls-dir", g.tls_dir, "connect with TLS using DIR/client.pem, client.key, "
                                         "ca.pem (else MONKEY_TLS_DIR, MONKEY_HOME/cluster.tls)");

  // submit
  auto* submit = app.add_subcommand("submit", "submit a job: monkey submit [OPTIONS] -- CMD ARGS...");
  std::string name, file, timeout, mem, gpu_mem, workdir, array, app_name;
  int cpus = 1, gpus = 0, retries = 0, max_requeues = 5, priority = 0;
  uint64_t seed = 0;
  std::vector<std::string> sets, envs, afters, tags;
  bool wait = false;
  submit->add_option("--name", name, "job name");
  submit->add_option("--file", file, "YAML or JSON spec file (flags override it)");
  submit->add_option("--app", app_name, "run an actor app instead of a command");
  submit->add_option("--cpus", cpus, "CPUs")->check(CLI::Range(1, 4096));
  submit->add_option("--gpus", gpus, "whole GPUs")->check(CLI::Range(0, 64));
  submit->add_option("--gpu-mem", gpu_mem, "memory per GPU, e.g. 8G");
  submit->add_option("--mem", mem, "memory, e.g. 512M");
  submit->add_option("--tag", tags, "required node tag (repeatable)");
  submit->add_option("--retries", retries, "more attempts after the job fails")->check(CLI::Range(0, 1000));
  submit->add_option("--max-requeues", max_requeues, "attempts lost to node crashes that are requeued")->check(CLI::Range(0, 1000));
  submit->add_option("--timeout", timeout, "time limit per attempt, e.g. 90s, 10m, 2h");
  submit->add_option("--priority", priority, "higher runs first");
  submit->add_option("--workdir", workdir, "working directory");
  submit->add_option("--env", envs, "NAME=VALUE (repeatable)");
  submit->add_option("--seed", seed, "random seed (MONKEY_SEED)");
  submit->add_option("--set", sets, "parameter NAME=VALUE (repeatable)");
  submit->add_option("--after", afters, "ok:ID or any:ID (repeatable)");
  submit->add_option("--array", array, "array of jobs, e.g. 0-99, 1,3,5 or 0-99:10");
  submit->add_flag("--wait", wait, "wait for the job and exit with its exit code");

  auto* jobs = app.add_subcommand("jobs", "list jobs");
  std::string state_filter;
  uint32_t limit = 0;
  jobs->add_option("--state", state_filter, "only jobs in this state");
  jobs->add_option("--limit", limit, "only the newest N");
  auto* status = app.add_subcommand("status", "node status");
  std::string job_arg;
  auto* show = app.add_subcommand("show", "a job's record, attempts and last metrics");
  show->add_option("ID", job_arg, "job id (full or a unique suffix)")->required();
  auto* logs = app.add_subcommand("logs", "a job's output");
  bool follow = false, stderr_stream = false;
  int attempt = 0;
  logs->add_option("ID", job_arg, "job id")->required();
  logs->add_flag("-f,--follow", follow, "follow until the job ends");
  logs->add_flag("--err", stderr_stream, "stderr instead of stdout");
  logs->add_option("--attempt", attempt, "attempt number (default: the latest)");
  auto* cancel = app.add_subcommand("cancel", "cancel a job");
  cancel->add_option("ID", job_arg, "job id")->required();
  auto* why = app.add_subcommand("why", "why a job waits");
  why->add_option("ID", job_arg, "job id")->required();
  auto* devices = app.add_subcommand("devices", "devices of the node");
  auto* nodes = app.add_subcommand("nodes", "nodes of the cluster");
  auto* drain = app.add_subcommand("drain", "planned leave of a node: its queued jobs go to "
                                            "other nodes now, its running ones finish, then it "
                                            "leaves");
  std::string drain_node;
  bool drain_wait = false;
  drain->add_option("NODE", drain_node, "node id (or a prefix of 4+ characters) or HOST:PORT")
    ->required();
  drain->add_flag("--wait", drain_wait, "wait until the node has left");
  auto* tree = app.add_subcommand("tree", "the node's live supervision tree with restart counts");
  auto* kill = app.add_subcommand("kill", "kill an actor by path; its supervisor restarts it");
  std::string actor_path;
  kill->add_option("ACTOR", actor_path, "path as shown by tree, e.g. core/coordinator")->required();
  app.add_subcommand("console", "interactive console: line editing, history, completion");

  up_options up_opt;
  double down_grace = 30;
  auto* up = app.add_subcommand("up", "start a local cluster of N nodes under MONKEY_HOME "
                                      "(monkey up N [OPTIONS] [-- RUNTIME OPTIONS...])");
  up->add_option("N", up_opt.nodes, "number of nodes")->capture_default_str();
  up->add_option("--cpus", up_opt.cpus, "CPUs per node (default: the host's split evenly)");
  up->add_option("--timeout", up_opt.timeout_s, "seconds until every node must see all alive")
    ->capture_default_str();
  up->add_flag("--no-measure", up_opt.no_measure, "skip measuring device speed");
  up->add_flag("--tls", up_opt.tls, "TLS between nodes and clients; certificates from "
                                    "MONKEY_HOME/certs (created when missing)");

  certs_options certs_opt;
  auto* certs = app.add_subcommand("certs", "create a cluster CA and certificates for nodes and "
                                            "clients (TLS, --tls)");
  certs->add_option("--dir", certs_opt.dir, "certificate folder (default MONKEY_HOME/certs)");
  certs->add_option("--name", certs_opt.names,
                    "certificate to issue (repeatable; default: node and client)");
  certs->add_option("--days", certs_opt.days, "validity of issued certificates")
    ->capture_default_str();
  certs->add_flag("--force", certs_opt.force, "reissue certificates that exist (the CA is kept)");
  auto* down = app.add_subcommand("down", "stop the local cluster started by `monkey up`");
  down->add_option("--grace", down_grace, "seconds before SIGKILL")->capture_default_str();

  // tasks: the light work kind (built-in functions, no child process)
  auto* tasks = app.add_subcommand("tasks", "task batches: submit, list (default), wait");
  auto* tasks_submit = tasks->add_subcommand("submit", "submit a batch of built-in tasks");
  auto* tasks_list = tasks->add_subcommand("list", "list task batches");
  auto* tasks_wait = tasks->add_subcommand("wait", "wait until every task of a batch is final");
  std::string task_kind = "noop", batch_arg;
  uint64_t task_count = 1, task_arg = 0;
  int task_priority = 0;
  bool task_wait_flag = false;
  tasks_submit->add_option("--kind", task_kind, "noop, sleep (arg: microseconds) or fail_every (arg: N)")
    ->capture_default_str();
  tasks_submit->add_option("--count", task_count, "tasks in the batch")->capture_default_str();
  tasks_submit->add_option("--arg", task_arg, "the argument every task of the batch gets");
  tasks_submit->add_option("--priority", task_priority, "higher runs first");
  tasks_submit->add_flag("--wait", task_wait_flag, "wait for the batch; exit 1 if a task failed");
  tasks_list->add_option("--limit", limit, "only the newest N");
  tasks_wait->add_option("ID", batch_arg, "batch id (full or a unique suffix)")->required();
  double tasks_timeout = -1;
  tasks_wait->add_option("--timeout", tasks_timeout,
                         "give up after S seconds (0: print the progress now); exit 124 if not done");

  // An unknown verb is named, not reported as a missing subcommand.
  for (size_t i = 1; i < args.size(); ++i) {
    std::string a = args[i];
    if (a == "--address" || a == "--secret-file" || a == "--tls-dir") {
      ++i;
      continue;
    }
    if (!a.empty() && a[0] == '-')
      continue;
    bool known = false;
    for (auto* sub : app.get_subcommands([](CLI::App*) { return true; }))
      known = known || sub->get_name() == a;
    if (!known)
      return fail("unknown command '" + a + "' (commands: submit, jobs, status, show, logs, "
                  "cancel, why, devices, nodes, drain, tree, kill, tasks, up, down, certs, console; see --help)", exit_usage);
    break;
  }
  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e); // prints help, or the error on stderr
    return code == 0 ? 0 : exit_usage;
  }
  if (!command.empty() && !submit->parsed() && !up->parsed())
    return fail("'--' and a command only go with submit (and runtime options with up)",
                exit_usage);

  if (up->parsed()) {
    up_opt.runtime_args = command;
    up_opt.json = g.json;
    up_opt.secret_file = g.secret_file;
    return cluster_up(up_opt);
  }
  if (down->parsed())
    return cluster_down(down_grace);
  if (certs->parsed()) {
    if (certs_opt.dir.empty())
      certs_opt.dir = monkey_home() + "/certs";
    if (certs_opt.names.empty())
      certs_opt.names = {"node", "client"};
    ::mkdir(monkey_home().c_str(), 0700);
    auto made = make_certs(certs_opt);
    if (!made)
      return fail(made.error());
    if (made->created_ca)
      std::printf("created a new cluster CA in %s (keep ca.key private; copy ca.pem to every "
                  "node)\n", certs_opt.dir.c_str());
    for (auto& w : made->written)
      std::printf("wrote %s\n", w.c_str());
    for (auto& k : made->kept)
      std::printf("kept  %s (exists; --force reissues it)\n", k.c_str());
    std::printf("start nodes with: monkey-runtime --tls --tls-dir %s [--tls-name NAME]\n"
                "clients use:      monkey --tls-dir %s ... (or MONKEY_TLS_DIR)\n",
                certs_opt.dir.c_str(), certs_opt.dir.c_str());
    return 0;
  }

  std::unique_ptr<client> own;
  if (!shared) {
    auto conn = open_client(g);
    if (!conn)
      return fail(conn.error());
    own = std::move(*conn);
  }
  auto& c = shared ? *shared : *own;

  if (tree->parsed()) {
    auto body = c.call(verb::tree, std::string{});
    if (!body)
      return fail("tree: " + body.error());
    auto t = decode<tree_node>(*body, "tree");
    if (!t)
      return fail("tree: " + t.error());
    std::fputs(render_tree(*t).c_str(), stdout);
    return 0;
  }
  if (kill->parsed()) {
    auto body = c.call(verb::kill_actor, encode(actor_path));
    if (!body)
      return fail("kill: " + body.error());
    std::printf("%s\n", body->c_str()); // plain text
    return 0;
  }

  if (submit->parsed()) {
    job_spec spec;
    if (!file.empty()) {
      auto parsed = parse_spec_file(file);
      if (!parsed)
        return fail(parsed.error(), exit_usage);
      spec = *parsed;
    }
    auto given = [&](const char* flag) { return submit->count(flag) > 0; };
    if (!command.empty())
      spec.command = command;
    if (given("--app"))
      spec.app = app_name;
    if (given("--name"))
      spec.name = name;
    if (given("--cpus"))
      spec.cpus = cpus;
    if (given("--gpus"))
      spec.gpus = gpus;
    if (given("--retries"))
      spec.retries = retries;
    if (given("--max-requeues"))
      spec.max_requeues = max_requeues;
    if (given("--priority"))
      spec.priority = priority;
    if (given("--workdir"))
      spec.workdir = workdir;
    if (given("--array"))
      spec.array = array;
    if (given("--seed")) {
      spec.seed = seed;
      spec.has_seed = true;
    }
    if (given("--timeout")) {
      auto t = parse_duration_s(timeout);
      if (!t)
        return fail("--timeout: " + t.error(), exit_usage);
      spec.timeout_s = *t;
    }
    if (given("--mem")) {
      auto m = parse_memory_mb(mem);
      if (!m)
        return fail("--mem: " + m.error(), exit_usage);
      spec.mem_mb = *m;
    }
    if (given("--gpu-mem")) {
      auto m = parse_memory_mb(gpu_mem);
      if (!m)
        return fail("--gpu-mem: " + m.error(), exit_usage);
      spec.gpu_mem_mb = *m;
    }
    for (auto& t : tags)
      spec.tags.push_back(t);
    for (auto& kv : sets) {
      auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0)
        return fail("--set " + kv + ": expected NAME=VALUE", exit_usage);
      spec.params[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    for (auto& kv : envs) {
      auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0)
        return fail("--env " + kv + ": expected NAME=VALUE", exit_usage);
      spec.env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    for (auto& a : afters) {
      auto d = parse_dependency(a);
      if (!d)
        return fail("--after: " + d.error(), exit_usage);
      spec.after.push_back(*d);
    }
    if (!spec.workdir.empty() && spec.workdir[0] != '/') {
      char cwd[4096];
      if (::getcwd(cwd, sizeof(cwd)))
        spec.workdir = std::string(cwd) + "/" + spec.workdir;
    } else if (spec.workdir.empty()) {
      char cwd[4096];
      if (::getcwd(cwd, sizeof(cwd)))
        spec.workdir = cwd;
    }
    spec.user = current_user();
    spec.host = current_host();
    if (auto problem = validate(spec); !problem.empty())
      return fail("invalid job: " + problem, exit_usage);
    submit_request req;
    req.spec = spec;
    req.client_key = random_key();
    auto r = c.call<submit_reply>(verb::submit, req);
    if (!r)
      return fail("submit: " + r.error());
    if (g.json) {
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
    if (!wait)
      return 0;
    int worst = 0;
    for (auto& id : r->ids) {
      for (;;) {
        auto s = c.call<show_reply>(verb::show, id_request{id.str()});
        if (!s)
          return fail("wait: " + s.error());
        if (is_final(s->record.state)) {
          worst = std::max(worst, exit_code_of(s->record));
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    }
    return worst;
  }

  if (tasks->parsed()) {
    auto print = [&](const task_batch_status& b) {
      std::printf("%-10s %-10s %10llu %10llu %8llu  %-9s %s\n", b.id.short_str().c_str(),
                  b.kind.c_str(), static_cast<unsigned long long>(b.count),
                  static_cast<unsigned long long>(b.succeeded),
                  static_cast<unsigned long long>(b.failed),
                  b.finished_ms ? "done" : "running",
                  b.first_failure.empty() ? "" : ("first failure: " + b.first_failure).c_str());
    };
    auto as_json = [](const task_batch_status& b) {
      return json{{"id", b.id.str()},       {"kind", b.kind},
                  {"arg", b.arg},           {"count", b.count},
                  {"succeeded", b.succeeded}, {"failed", b.failed},
                  {"submitted_ms", b.submitted_ms}, {"finished_ms", b.finished_ms},
                  {"first_failure", b.first_failure}};
    };
    auto header = [] {
      std::printf("%-10s %-10s %10s %10s %8s  %-9s\n", "BATCH", "KIND", "TASKS", "SUCCEEDED",
                  "FAILED", "STATE");
    };
    auto wait_for = [&](const std::string& id) -> expected<task_batch_status> {
      auto deadline = std::chrono::steady_clock::now()
                      + std::chrono::milliseconds(static_cast<int64_t>(tasks_timeout * 1000));
      for (;;) {
        uint32_t step = 20000;
        if (tasks_timeout >= 0) {
          auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - std::chrono::steady_clock::now())
                        .count();
          step = static_cast<uint32_t>(std::clamp<int64_t>(left, 0, 20000));
        }
        auto r = c.call<task_batch_status>(verb::wait_tasks, wait_tasks_request{id, step},
                                           std::chrono::seconds(60));
        if (!r || r->finished_ms != 0 || (tasks_timeout >= 0 && step == 0))
          return r;
      }
    };
    if (tasks_submit->parsed()) {
      submit_tasks_request req;
      req.kind = task_kind;
      req.count = task_count;
      req.arg = task_arg;
      req.priority = task_priority;
      req.user = current_user();
      req.host = current_host();
      req.client_key = random_key();
      auto r = c.call<submit_tasks_reply>(verb::submit_tasks, req);
      if (!r)
        return fail("tasks submit: " + r.error());
      if (!task_wait_flag) {
        if (g.json)
          std::cout << json{{"id", r->id.str()}}.dump() << "\n";
        else
          std::cout << r->id.str() << "\n";
        return 0;
      }
      auto done = wait_for(r->id.str());
      if (!done)
        return fail("tasks wait: " + done.error());
      if (g.json) {
        std::cout << as_json(*done).dump() << "\n";
      } else {
        header();
        print(*done);
        std::cout << r->id.str() << "\n";
      }
      return done->failed > 0 ? 1 : 0;
    }
    if (tasks_wait->parsed()) {
      auto done = wait_for(batch_arg);
      if (!done)
        return fail("tasks wait: " + done.error());
      if (g.json) {
        std::cout << as_json(*done).dump() << "\n";
      } else {
        header();
        print(*done);
      }
      if (done->finished_ms == 0)
        return exit_timed_out;
      return done->failed > 0 ? 1 : 0;
    }
    auto r = c.call<task_list_reply>(verb::list_tasks, list_request{"", limit});
    if (!r)
      return fail("tasks: " + r.error());
    if (g.json) {
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

  if (jobs->parsed()) {
    auto r = c.call<list_reply>(verb::list, list_request{state_filter, limit, false});
    if (!r)
      return fail("jobs: " + r.error());
    if (!r->unreachable.empty()) {
      std::string who;
      for (auto& n : r->unreachable)
        who += (who.empty() ? "" : ", ") + n;
      std::fprintf(stderr, "monkey: jobs: partial list: no answer from %s\n", who.c_str());
    }
    if (g.json) {
      json out = json::array();
      for (auto& j : r->jobs)
        out.push_back(to_json(j));
      std::cout << out.dump() << "\n";
      return 0;
    }
    std::printf("%-10s  %-24s  %-9s  %3s  %4s  %4s  %5s  %-8s  %s\n", "ID", "NAME", "STATE",
                "ATT", "PRIO", "EXIT", "AGE", "NODE", "REASON");
    for (auto& j : r->jobs)
      std::printf("%-10s  %-24.24s  %-9s  %3d  %4d  %4s  %5s  %-8.8s  %s\n",
                  j.id.short_str().c_str(), j.name.c_str(),
                  j.unavailable ? "unavailable" : to_string(j.state), j.attempts,
                  j.priority, j.exit_code < 0 ? "-" : std::to_string(j.exit_code).c_str(),
                  age(j.submitted_ms).c_str(), (j.ran_on.empty() ? j.owner : j.ran_on).c_str(),
                  j.reason.c_str());
    return 0;
  }

  if (drain->parsed()) {
    auto r = c.call<text_reply>(verb::drain, id_request{drain_node, false});
    if (!r)
      return fail("drain: " + r.error());
    std::printf("%s\n", r->text.c_str());
    if (!drain_wait)
      return 0;
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      // The node we asked may be the one leaving: ask whichever node answers.
      auto conn = open_client(g);
      if (!conn)
        continue;
      auto n = (*conn)->call<nodes_reply>(verb::nodes, std::string{});
      if (!n)
        continue;
      for (auto& m : n->members)
        if ((m.node.compare(0, drain_node.size(), drain_node) == 0 || m.address == drain_node)
            && (m.state == member_state::left || m.state == member_state::dead)) {
          std::printf("node %s has %s the cluster\n", m.node.c_str(),
                      m.state == member_state::left ? "left" : "died and left");
          return m.state == member_state::left ? 0 : 1;
        }
    }
  }

  if (nodes->parsed()) {
    auto r = c.call<nodes_reply>(verb::nodes, std::string{});
    if (!r)
      return fail("nodes: " + r.error());
    if (g.json) {
      json out = json::array();
      for (auto& m : r->members)
        out.push_back({{"node", m.node},
                       {"address", m.address},
                       {"pid", m.pid},
                       {"incarnation", incarnation_text(m.incarnation)},
                       {"state", to_string(m.state)},
                       {"since_ms", m.since_ms},
                       {"reason", m.reason},
                       {"cpus", m.cpus},
                       {"gpus", m.gpus},
                       {"devices", m.devices},
                       {"self", m.node == r->self}});
      std::cout << out.dump() << "\n";
      return 0;
    }
    std::printf("%-17s %-22s %8s %6s %-8s %-20s %-10s %s\n", "NODE", "ADDRESS", "PID", "INC",
                "STATE", "SINCE", "DEVICES", "REASON");
    for (auto& m : r->members)
      std::printf("%-17s %-22s %8d %6s %-8s %-20s %-10s %s\n",
                  (m.node + (m.node == r->self ? "*" : "")).c_str(), m.address.c_str(), m.pid,
                  incarnation_text(m.incarnation).c_str(), to_string(m.state),
                  clock_time(m.since_ms).c_str(), m.devices.c_str(), m.reason.c_str());
    std::printf("agreed member list: %u, of which alive: %u (%s)\n", r->agreed, r->agreed_alive,
                r->agreed_alive * 2 > r->agreed ? "a majority: this node starts attempts"
                                                : "no majority: this node starts no attempts and "
                                                  "refuses submissions");
    return 0;
  }
  if (status->parsed() || devices->parsed()) {
    auto r = c.call<status_reply>(verb::status, std::string{});
    if (!r)
      return fail(r.error());
    if (g.json) {
      if (devices->parsed())
        std::cout << to_json(*r)["devices"].dump() << "\n";
      else
        std::cout << to_json(*r).dump() << "\n";
      return 0;
    }
    if (devices->parsed()) {
      std::printf("%-8s %-5s %-40s %6s %6s %10s %10s\n", "DEVICE", "KIND", "MODEL", "SLOTS",
                  "FREE", "MEMORY_MB", "GFLOP/S");
      for (auto& d : r->devices)
        std::printf("%-8s %-5s %-40.40s %6d %6d %10lld %10s\n", d.name.c_str(), d.kind.c_str(),
                    d.model.c_str(), d.slots, d.free_slots, static_cast<long long>(d.memory_mb),
                    d.gflops > 0 ? std::to_string(static_cast<int>(d.gflops)).c_str() : "-");
      return 0;
    }
    std::printf("node %s (incarnation %u) at %s, pid %d, up since %s%s\n", r->node.c_str(),
                r->incarnation, r->address.c_str(), r->pid, clock_time(r->started_ms).c_str(),
                r->accepting ? "" : " [shutting down]");
    std::printf("cpus %d/%d free, gpus %d/%d free, memory %lld/%lld MB free\n", r->cpus_free,
                r->cpus_total, r->gpus_free, r->gpus_total,
                static_cast<long long>(r->mem_free_mb), static_cast<long long>(r->mem_total_mb));
    std::string counts;
    for (auto& [s, n] : r->jobs_by_state)
      counts += (counts.empty() ? "" : ", ") + s + " " + std::to_string(n);
    std::printf("jobs: %s\n", counts.empty() ? "none" : counts.c_str());
    if (r->tasks_queued > 0 || r->tasks_in_flight > 0)
      std::printf("tasks: %llu queued, %llu chunks on device proxies\n",
                  static_cast<unsigned long long>(r->tasks_queued),
                  static_cast<unsigned long long>(r->tasks_in_flight));
    return 0;
  }

  if (show->parsed()) {
    auto r = c.call<show_reply>(verb::show, id_request{job_arg});
    if (!r)
      return fail("show: " + r.error());
    if (g.json) {
      std::cout << to_json(*r).dump(2) << "\n";
      return 0;
    }
    auto& rec = r->record;
    std::string cmd;
    for (auto& a : rec.spec.command)
      cmd += (cmd.empty() ? "" : " ") + a;
    std::printf("job       %s (%s)\n", rec.id.str().c_str(), display_name(rec.spec).c_str());
    std::printf("state     %s — %s\n", to_string(rec.state), rec.reason.c_str());
    std::printf("command   %s\n", rec.spec.app.empty() ? cmd.c_str() : ("app " + rec.spec.app).c_str());
    for (auto& [k, v] : rec.spec.params)
      std::printf("param     %s=%s\n", k.c_str(), v.c_str());
    std::printf("resources cpus=%d gpus=%d mem=%lldMB\n", rec.spec.cpus, rec.spec.gpus,
                static_cast<long long>(rec.spec.mem_mb));
    std::printf("retries   %d/%d used, requeues %d/%d used, timeout %s, priority %d, seed %llu\n",
                rec.retries_used, rec.spec.retries, rec.requeues_used, rec.spec.max_requeues,
                rec.spec.timeout_s > 0 ? (std::to_string(rec.spec.timeout_s) + "s").c_str() : "none",
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
                  static_cast<long long>(a.max_rss_kb), a.cpu_s,
                  clock_time(a.started_ms).c_str(), clock_time(a.ended_ms).c_str());
    for (auto& [k, v] : r->last_metrics)
      std::printf("metric    %s = %g\n", k.c_str(), v);
    return 0;
  }

  if (logs->parsed()) {
    logs_request req;
    req.id = job_arg;
    req.attempt = attempt;
    req.stream = stderr_stream ? "err" : "out";
    for (;;) {
      auto r = c.call<logs_reply>(verb::logs, req);
      if (!r)
        return fail("logs: " + r.error());
      std::fwrite(r->data.data(), 1, r->data.size(), stdout);
      std::fflush(stdout);
      req.offset = r->offset;
      if (req.attempt == 0 && r->attempt > 0)
        req.attempt = r->attempt;
      if (!r->data.empty())
        continue;
      if (!follow)
        break;
      if (r->finished && r->attempt < r->attempts && attempt == 0) {
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

  if (cancel->parsed() || why->parsed()) {
    auto r = c.call<text_reply>(cancel->parsed() ? verb::cancel : verb::why, id_request{job_arg});
    if (!r)
      return fail(std::string(cancel->parsed() ? "cancel" : "why") + ": " + r.error());
    std::printf("%s\n", r->text.c_str());
    return 0;
  }
  return fail("unknown command", exit_usage);
}

int main(int argc, char** argv) {
  // `monkey [--address A] [--secret-file F] console [-c CMD]` runs the console.
  std::vector<std::string> words(argv + 1, argv + argc);
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] == "--address" || words[i] == "--secret-file") {
      ++i;
      continue;
    }
    if (words[i] == "--")
      break;
    if (!words[i].empty() && words[i][0] == '-')
      continue;
    if (words[i] != "console")
      break;
    console_options opt;
    for (size_t k = 0; k < words.size(); ++k) {
      if (words[k] == "--address" && k + 1 < words.size())
        opt.address = words[++k];
      else if (words[k] == "--secret-file" && k + 1 < words.size())
        opt.secret_file = words[++k];
      else if (words[k] == "-c" && k + 1 < words.size())
        opt.command = words[++k];
      else if (words[k] == "--help" || words[k] == "-h") {
        std::printf("monkey console [-c COMMAND]: a REPL on the running node; every monkey "
                    "verb, plus tree and kill ACTOR; exit or Ctrl-D to leave\n");
        return 0;
      } else if (words[k] != "console" && words[k] != "--json") {
        return fail("console: unexpected argument '" + words[k] + "'", exit_usage);
      }
    }
    return run_console(opt, run_cli);
  }
  return run_cli(argc, argv, nullptr);
}
