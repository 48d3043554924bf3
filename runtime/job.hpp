// SPDX-License-Identifier: Apache-2.0
#pragma once
// The job model: spec (what the user asked for), attempts (each try at running it) and
// the record (spec + state + attempts) that the journal stores and replicas will share.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/wire/codec.hpp"
#include "runtime/expected.hpp"
#include "runtime/ids.hpp"

namespace monkey {

enum class job_state : uint8_t {
  queued = 0,    ///< accepted, waiting for dependencies or resources
  running = 1,   ///< an attempt is running
  succeeded = 2, ///< final: exit 0
  failed = 3,    ///< final: non-zero exit or signal, retries used up
  cancelled = 4, ///< final: cancelled by a user, or a dependency can never be met
  timed_out = 5, ///< final: the last attempt ran past its timeout
  lost = 6,      ///< final: lost to runtime crashes more often than --max-requeues
  stopped = 7,   ///< final: stopped early by its sweep (or `monkey stop`), not a failure
};

const char* to_string(job_state s);
bool is_final(job_state s);

/// `--after ok:ID` (the dependency must succeed) or `--after any:ID` (must end).
struct dependency {
  std::string kind; ///< "ok" or "any"
  job_id job;
  MSGPACK_DEFINE_MAP(kind, job);
};

/// Code or data shipped with a job (docs/shipping.md): a bundle stored in the cluster by
/// its SHA-256 and unpacked into the attempt's scratch directory on the node that runs it.
struct shipment {
  std::string kind;   ///< "workdir" or "data"
  std::string source; ///< the path it was packed from, on the submitting host (for show)
  std::string sha256; ///< the bundle's, hex
  uint64_t bytes = 0; ///< the bundle's size
  int64_t files = 0;
  /// Where it is unpacked, relative to the scratch directory: "work" for the working
  /// directory, "work/<cwd>/<path>" for a relative data path, "data/<name>" otherwise.
  std::string into;
  std::string cwd; ///< workdir: where the job runs inside the bundle ("": its top)
  MSGPACK_DEFINE_MAP(kind, source, sha256, bytes, files, into, cwd);
};

struct job_spec {
  std::string name;
  std::vector<std::string> command; ///< argv; `{param}` placeholders are substituted
  std::string app;                  ///< an actor app's name instead of a command
  std::map<std::string, std::string> params;
  int32_t cpus = 1;
  int32_t gpus = 0;       ///< whole GPUs
  int64_t gpu_mem_mb = 0; ///< per GPU
  int64_t mem_mb = 0;
  std::vector<std::string> tags;
  int32_t retries = 0;      ///< more attempts after the job itself fails
  int32_t max_requeues = 5; ///< separate budget for attempts lost to runtime crashes
  double timeout_s = 0;     ///< 0: none
  /// How long an attempt is expected to run (`--time-estimate`, key `time_estimate`): for
  /// backfill only, nothing is stopped at it. 0: none (without a timeout either, the job is
  /// never backfilled and running, it holds its slots for an unknown time).
  double time_estimate_s = 0;
  int32_t priority = 0;     ///< higher runs first
  std::string workdir;
  std::map<std::string, std::string> env;
  uint64_t seed = 0;
  bool has_seed = false;
  std::vector<dependency> after;
  std::string array;        ///< e.g. "0-99", "1,4,9" or "0-99:10" (step); expanded at submit
  int32_t array_index = -1; ///< set on each element of an array
  std::string user;         ///< submitting user and host
  std::string host;
  /// The wait before retry k is min(retry_backoff_max_s, retry_backoff_s * 2^(k-1));
  /// 0 retries at once (`--retry-backoff 1s..1m`, spec key `retry_backoff`).
  double retry_backoff_s = 1;
  double retry_backoff_max_s = 60;
  /// An app job's ranks (`--workers`, spec key `workers`); cpus, gpus and mem are per worker.
  int32_t workers = 1;
  /// Ranks the app asks for beyond the workers, from its parameters (fmnist's dedicated
  /// parameter servers: `servers=2 ps_placement=dedicated`); set at submit from the app's
  /// schema (never by clients), placed and counted like workers.
  int32_t extra_ranks = 0;
  /// Every rank of the gang: the workers and the app's extra ranks.
  int32_t ranks() const { return workers + extra_ranks; }
  /// The app's build (a hash of its executable), chosen at submit: only nodes with this
  /// build run the job.
  std::string app_build;
  /// Another job whose newest checkpoint this one starts from while it has none of its own
  /// (`--checkpoint-from JOB`, spec key `checkpoint_from`; docs/checkpoints.md).
  std::string checkpoint_from;
  /// A sweep's trial: the sweep (its driver job's id) and the trial's number in it (from 0);
  /// "" and -1 otherwise (docs/sweeps.md).
  std::string sweep;
  int32_t trial = -1;
  /// The job drives other jobs (a sweep's driver): the node that runs an attempt of it
  /// runs the sweep's optimizer actor in itself instead of a process
  /// (actors/sweep/sweep_actor.hpp); its command only names the sweep.
  bool driver = false;
  /// What is needed to run it again (runtime/provenance.hpp; `monkey reproduce`): git
  /// commit, uncommitted diff and its hash, versions; `reproduces`: the job it repeats.
  std::map<std::string, std::string> provenance;
  /// The working directory and data folders shipped with it (`--ship-workdir`,
  /// `--ship-data`; set by the client after it stored the bundles).
  std::vector<shipment> ship;
  MSGPACK_DEFINE_MAP(name, command, app, params, cpus, gpus, gpu_mem_mb, mem_mb, tags, retries,
                     max_requeues, timeout_s, priority, workdir, env, seed, has_seed, after, array,
                     array_index, user, host, retry_backoff_s, retry_backoff_max_s, workers,
                     app_build, time_estimate_s, checkpoint_from, extra_ranks, sweep, trial,
                     driver, provenance, ship);
};

struct attempt_record {
  attempt_id id;
  int32_t number = 0;   ///< 1-based within the job
  std::string outcome;  ///< running, succeeded, failed, timeout, cancelled, lost, requeued
  std::string cause;    ///< in plain words: "exit 1", "killed by signal 9 (SIGKILL)", ...
  int64_t started_ms = 0;
  int64_t ended_ms = 0;
  int32_t pid = 0;
  int32_t pgid = 0;
  uint64_t start_ticks = 0; ///< /proc/PID/stat starttime, to recognise the process later
  std::string cgroup;       ///< cgroup v2 directory when one was made
  int32_t exit_code = -1;
  int32_t term_signal = 0;
  int64_t max_rss_kb = 0;
  double cpu_s = 0;
  std::string log_out;
  std::string log_err;
  std::vector<int32_t> gpus; ///< CUDA device indices it was given
  /// An app job's placement: which node hosts which ranks ("NODE:0-3", one per host).
  std::vector<std::string> hosts;
  /// The checkpoint step this attempt started from (-1: none), and whose (a job id; another
  /// job's with --checkpoint-from).
  int64_t resumed_step = -1;
  std::string resumed_from;
  MSGPACK_DEFINE_MAP(id.node, id.incarnation, id.seq, number, outcome, cause, started_ms,
                     ended_ms, pid, pgid, start_ticks, cgroup, exit_code, term_signal, max_rss_kb,
                     cpu_s, log_out, log_err, gpus, hosts, resumed_step, resumed_from);
};

/// How long placement counts on an attempt of the job running: its timeout, else its time
/// estimate, else 0 (unknown).
inline double run_bound_s(const job_spec& s) {
  return s.timeout_s > 0 ? s.timeout_s : s.time_estimate_s;
}

struct job_record {
  job_id id;
  job_spec spec;
  job_state state = job_state::queued;
  uint64_t version = 0; ///< bumped by every transition
  node_id owner;
  uint64_t submit_seq = 0; ///< first-come-first-served order within a priority
  int64_t submitted_ms = 0;
  int64_t updated_ms = 0;
  int32_t retries_used = 0;
  int32_t requeues_used = 0;
  std::string reason; ///< why the last transition happened
  std::string client_key;
  std::vector<attempt_record> attempts;
  std::vector<std::string> replicas; ///< node ids holding the record, the owner first
  int64_t not_before_ms = 0; ///< a retry waiting for its backoff starts no earlier (wall clock)
  MSGPACK_DEFINE_MAP(id, spec, state, version, owner, submit_seq, submitted_ms, updated_ms,
                     retries_used, requeues_used, reason, client_key, attempts, replicas,
                     not_before_ms);
};

/// One `MONKEY_METRIC key=value` value. A point is named by (job, attempt, rank, key,
/// step): the same point arriving twice (a re-adopted worker reads the log again, a batch
/// is sent again) is stored once.
struct metric_point {
  job_id job;
  int32_t attempt = 0;
  int64_t ts_ms = 0;
  std::string key;
  double value = 0;
  int64_t step = 0; ///< the line's `step=` field, else the key's count within the attempt
  int32_t rank = 0; ///< the line's `rank=` field (a worker of a distributed job), else 0
  MSGPACK_DEFINE_MAP(job, attempt, ts_ms, key, value, step, rank);
};

/// A metric key's history in one job: how many points, the first, lowest, highest and
/// last value (`monkey show`).
struct metric_stats {
  int64_t count = 0;
  double first = 0;
  double min = 0;
  double max = 0;
  double last = 0;
  MSGPACK_DEFINE_MAP(count, first, min, max, last);
};

/// The backoff before retry `k` (1-based) of `spec`, in seconds.
double retry_delay_s(const job_spec& spec, int32_t k);

/// `MONKEY_PARAM_<NAME>`: upper case, every other character becomes `_`.
std::string param_env_name(const std::string& param);

/// Checks a spec's values; returns "field: problem" or "" when valid.
status validate(const job_spec& spec);

/// "4 workers", or "4 workers + 2 more ranks" when the app asks for extra ranks.
std::string workers_text(const job_spec& s);

/// Expands an array expression ("0-9", "1,3,5", "0-99:10") into indices, or a failure.
expected<std::vector<int32_t>> expand_array(const std::string& expr);

/// Replaces `{name}` in each argument with the parameter's value (`{{` is a literal brace).
expected<std::vector<std::string>> substitute_params(const job_spec& spec);

/// A display name: the spec's name, else the command's basename, plus `[i]` for arrays.
std::string display_name(const job_spec& spec);

/// The log of rank `rank` of an app attempt whose stdout is `log_out` ("DIR/2.out" →
/// "DIR/2.rank-3.log").
std::string rank_log_path(const std::string& log_out, int32_t rank);

/// "0-3" for {0,1,2,3}, "0,2,5-7" otherwise (an app host's ranks).
std::string rank_list_text(const std::vector<int32_t>& ranks);
/// The ranks of such a text, in order; empty when it is malformed.
std::vector<int32_t> parse_rank_list(const std::string& text);

/// Parses one `MONKEY_METRIC k=v k2=v2` line; returns false when it is not one.
bool parse_metric_line(std::string_view line, std::vector<std::pair<std::string, double>>& out);

/// Parses one `MONKEY_CHECKPOINT step=N` line (a command job's checkpoint directory is
/// complete at step N); `step` is -1 when the line names none. False when it is not one.
bool parse_checkpoint_line(std::string_view line, int64_t& step);

/// The checkpoint store's entry that holds the shipped bundle `sha256` ("ship-<sha256>").
std::string ship_store_entry(const std::string& sha256);

/// The checkpoint store entries a job record keeps in use (docs/checkpoints.md,
/// "Collection"): its own checkpoints, those it starts from (`checkpoint_from`), and the
/// bundles it ships.
std::vector<std::string> store_entries_of(const job_record& rec);

} // namespace monkey

MSGPACK_ADD_ENUM(monkey::job_state);
