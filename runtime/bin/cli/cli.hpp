// SPDX-License-Identifier: Apache-2.0
#pragma once
// The `monkey` command line: one file per verb (runtime/bin/cli/<verb>.cpp), each of which
// registers its subcommand with CLI11 and says how to run it; this header has what they
// share (options, the connection, exit codes, output formatting). main.cpp parses and
// dispatches; the console runs every line through the same run_cli.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "runtime/client/client.hpp"

namespace monkey::cli {

using json = nlohmann::json;

// Exit codes besides 0 and 1 (`submit --wait` exits with the job's own code).
constexpr int exit_usage = 2;
constexpr int exit_stopped = 122; ///< stopped early (a sweep's trial)
constexpr int exit_lost = 123;
constexpr int exit_timed_out = 124;
constexpr int exit_cancelled = 125;

/// Options every verb takes (before or after the verb).
struct globals {
  std::string address;
  std::string secret_file;
  std::string token_file;
  std::string tls_dir;
  bool json = false;
  double timeout_s = 5; ///< connecting to one node; requests get their own deadlines
};

/// What a verb runs with.
struct context {
  globals g;
  client* shared = nullptr;          ///< the console's connection, when run from the console
  std::unique_ptr<client> own;       ///< opened on first use otherwise
  std::vector<std::string> command;  ///< the words after "--"
  /// The connection (the console's, or a new one to the first node that answers).
  expected<client*> connect();
  /// A new connection to the first of `addresses` that answers, for a command that outlives
  /// the node it talked to (`sweep start --wait`); the console's connection is not replaced.
  expected<client*> reconnect(const std::vector<std::string>& addresses);
  std::vector<std::unique_ptr<client>> retired; ///< replaced connections, closed at exit
};

using runner = std::function<int(context&)>;

/// The one member of `members` that `name` names (a name, a node id or its unique prefix),
/// else why not: "no node of that name (nodes: n1, n2, n3)" or "ambiguous (nodes: …)".
expected<const member*> one_member(const std::vector<member>& members, const std::string& name);

/// An integer option's check, run on the text before CLI11 converts it: "--cpus: a whole
/// number from 1 to 4096 is expected, not 'abc'" (CLI11's own Range says "not in range").
CLI::Validator whole_number(long long lo, long long hi);

/// A verb: its CLI11 subcommand and what runs when it was given.
struct verb_def {
  CLI::App* sub = nullptr;
  runner run;
  bool takes_command = false; ///< accepts the words after "--"
  bool needs_node = true;     ///< false: runs without a node (up, down, certs)
};

// One function per verb file.
verb_def add_submit(CLI::App& app);
verb_def add_jobs(CLI::App& app);
verb_def add_show(CLI::App& app);
verb_def add_metrics(CLI::App& app);
verb_def add_why(CLI::App& app);
verb_def add_logs(CLI::App& app);
verb_def add_cancel(CLI::App& app);
verb_def add_status(CLI::App& app);
verb_def add_devices(CLI::App& app);
verb_def add_nodes(CLI::App& app);
verb_def add_drain(CLI::App& app);
verb_def add_tree(CLI::App& app);
verb_def add_kill(CLI::App& app);
verb_def add_tasks(CLI::App& app);
verb_def add_up(CLI::App& app);
verb_def add_down(CLI::App& app);
verb_def add_certs(CLI::App& app);
verb_def add_console(CLI::App& app);
verb_def add_rm(CLI::App& app);
verb_def add_checkpoints(CLI::App& app);
verb_def add_sweep(CLI::App& app);
verb_def add_reproduce(CLI::App& app);

/// The points of metric `key` of job `id` that rank 0 of its newest attempt reported, by
/// step (a retried job starts its series again): a sweep's trials, reproduce's comparison.
expected<std::vector<std::pair<int64_t, double>>> metric_series(client& c, const std::string& id,
                                                                const std::string& key);
/// The same from a `show` reply asked with id_request::metric.
std::vector<std::pair<int64_t, double>> metric_series(const show_reply& r);

/// What to ship with a job (ship.cpp; docs/shipping.md).
struct ship_request {
  bool workdir = false;          ///< --ship-workdir, spec key `ship: true`
  std::vector<std::string> data; ///< --ship-data PATH, spec key `data`
  uint64_t max_workdir = 100ull << 20; ///< --ship-max overrides both
  uint64_t max_data = 4ull << 30;
  bool quiet = false;            ///< no progress lines on stderr
};

/// Packs the working directory `workdir` and the data paths (relative ones from the
/// current directory) into bundles, stores those the cluster lacks (each on up to three
/// nodes) and returns the shipments a job spec carries; or the failure naming what is wrong
/// (a missing path, a limit, an upload that failed).
expected<std::vector<shipment>> ship_files(context& ctx, const std::string& workdir,
                                           const ship_request& what);

/// What a job submitted from `workdir` records to be run again (collect_provenance), its
/// uncommitted diff stored once in the cluster, content-addressed (`git_diff_stored`;
/// docs/reproduce.md) instead of in every record; kept in the record (cut at 64 KiB) with a
/// warning when the cluster cannot store it.
std::map<std::string, std::string> job_provenance(context& ctx, const std::string& workdir,
                                                  const std::vector<std::string>& command);

/// Node id → name, as the connected node knows its members (empty when it cannot say).
std::map<std::string, std::string> node_names(context& ctx);
/// The name of `node` in `names`, else the node id.
std::string name_of(const std::map<std::string, std::string>& names, const std::string& node);

/// Prints "monkey: MSG" on stderr and returns `code`.
int fail(const std::string& msg, int code = 1);

/// Runs one command line (argv[0] is the program name); `shared` is the console's
/// connection (nullptr: connect when needed).
int run_cli(int argc, char** argv, client* shared);

// ---- output (format.cpp) ---------------------------------------------------------------
std::string age(int64_t ms);
std::string clock_time(int64_t ms);
json to_json(const job_summary& s);
/// `arg` as a POSIX shell reads it back ('…' quoting where needed).
std::string shell_quote(const std::string& arg);
/// The command with its placeholders filled, each argument quoted as needed (pasteable).
std::string command_line(const job_spec& spec);
/// The `monkey submit` line that runs `spec` again as it ran: its app and workers or its
/// command, resources, every parameter (`--set`, searched and fixed alike: a command job
/// reads them as MONKEY_PARAM_*) and its seed. What `sweep best` and `reproduce --dry-run`
/// print.
std::string submit_line(const job_spec& spec);
json to_json(const attempt_record& a);
json to_json(const show_reply& r);
json to_json(const status_reply& s);
/// The exit code `submit --wait` reports for a final record.
int exit_code_of(const job_record& rec);

} // namespace monkey::cli
