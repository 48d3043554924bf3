// SPDX-License-Identifier: Apache-2.0
#pragma once
// The client protocol (`monkey` CLI and console ↔ a node). Each request travels as one
// envelope {verb, msgpack body}; the reply is a msgpack body or a caf::error. Bodies use
// MSGPACK_DEFINE_MAP so fields can be added. Wire forms: docs/protocol.md.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/wire/codec.hpp"
#include "runtime/checkpoint/store.hpp"
#include "runtime/job.hpp"
#include "runtime/membership.hpp"
#include "runtime/tasks.hpp"

namespace monkey {

/// Bumped on any incompatible change of the protocol.
constexpr uint32_t protocol_version = 3;

enum class verb : uint16_t {
  hello = 1,
  auth = 2,
  submit = 3,
  list = 4,
  show = 5,
  logs = 6,
  cancel = 7,
  why = 8,
  status = 9,
  devices = 10,
  nodes = 11,
  tree = 12,
  kill_actor = 13,
  submit_tasks = 14,
  list_tasks = 15,
  wait_tasks = 16,
  // between nodes (docs/cluster.md); answered by the membership actor
  peer_join = 17,
  peer_ping = 18,
  peer_ping_req = 19,
  peer_replicate = 20, ///< job records to a replica; answered by its coordinator
  drain = 21,          ///< `monkey drain NODE`: hand the node's jobs over, then leave
  peer_digest = 22,    ///< anti-entropy: one page of (id, version) the asker should hold
  peer_fetch = 23,     ///< anti-entropy: the records of the given ids
  peer_reserve = 24,   ///< placement: "run this job now?" (granted: it owns the job)
  peer_withdraw = 25,  ///< placement: an unanswered reservation request is withdrawn
  peer_metrics = 26,   ///< metric points of jobs the receiver holds, from the node running them
  remove = 27,         ///< `monkey rm`: delete final jobs, their logs and metrics, everywhere
  peer_forget = 28,    ///< delete these jobs here and keep a tombstone (from rm, or a holder)
  peer_metric_pull = 29, ///< the metric points of these jobs (a new holder catches up)
  // from an app host (role app) to the node that started it (docs/writing-apps.md)
  app_report = 30, ///< metric points of the host's ranks
  app_ready = 31,  ///< the host's ranks are running (its actors, for `tree` and `show`)
  // gang placement across nodes (docs/cluster.md, "Gangs")
  peer_lease = 32,      ///< hold slots for a gang's workers, with an expiry (or release them)
  peer_gang_start = 33, ///< commit a lease: run these ranks of the gang's attempt here
  peer_gang_poll = 34,  ///< the owner asks how its parts run; tells them peers and stops
  // checkpoints (docs/checkpoints.md); answered by the node's checkpoints actor
  peer_ckpt_push = 35,  ///< "fetch this piece of a job's checkpoint from me and keep it"
  peer_ckpt_list = 36,  ///< the pieces of a job's checkpoints this node has (with tickets)
  app_checkpoint = 37,  ///< from an app host: its ranks saved a step (answered when durable)
  checkpoints = 38,     ///< `monkey checkpoints JOB`: a job's pieces on the alive members
  // shipped code and data (docs/shipping.md); answered by the checkpoints actor
  ship_have = 39, ///< which of these bundles the alive members hold already
  ship_put = 40,  ///< one chunk of a bundle; the last one stores and replicates it
  // the collection of checkpoint stores (docs/checkpoints.md, "Collection")
  peer_store_refs = 41, ///< which of these store entries a job this node holds refers to
  ship_get = 42,        ///< bytes of a stored bundle or diff (fetched from a member if need be)
};

const char* to_string(verb v);

struct hello_request {
  uint32_t protocol = protocol_version;
  std::string role = "client"; ///< client, node or app: the key the session will prove
  std::string attempt;         ///< app: the attempt id whose key it proves
  MSGPACK_DEFINE_MAP(protocol, role, attempt);
};

struct hello_reply {
  std::string nonce;
  std::string node;
  uint32_t protocol = protocol_version;
  MSGPACK_DEFINE_MAP(nonce, node, protocol);
};

struct auth_request {
  std::string client_nonce;
  std::string proof;
  std::string user;
  std::string host;
  MSGPACK_DEFINE_MAP(client_nonce, proof, user, host);
};

struct auth_reply {
  std::string proof;
  MSGPACK_DEFINE_MAP(proof);
};

struct submit_request {
  job_spec spec;          ///< an array spec is expanded by the node
  std::string client_key; ///< a retried submit with the same key creates nothing new
  int32_t hops = 0;       ///< forwards so far (a node forwards a client's submit to the owner once)
  /// The client or the forwarding node tries again after a failure: the owner then looks the
  /// key up on every alive member before it creates anything.
  bool retry = false;
  /// A forwarded submission is refused after this time (the forwarding node's clock, ms):
  /// by then that node has tried another owner.
  int64_t deadline_ms = 0;
  MSGPACK_DEFINE_MAP(spec, client_key, hops, retry, deadline_ms);
};

/// peer_metrics: a batch of metric points for jobs whose record the receiver holds.
struct metrics_request {
  std::string from;
  std::vector<metric_point> points;
  MSGPACK_DEFINE_MAP(from, points);
};

/// app_report: metric points of an app host's ranks (job and attempt are the session's).
/// The gateway sets `attempt` from the session: a host cannot speak for another attempt.
struct app_report_request {
  std::vector<metric_point> points;
  std::string attempt;
  MSGPACK_DEFINE_MAP(points, attempt);
};

/// app_report's answer: what the node asks of the host (`monkey kill .../rank-R`).
struct app_report_reply {
  std::vector<int32_t> kill_ranks;
  /// A gang on several hosts: every host's rank directory (host:port), once every host is
  /// ready; the host's ranks start when it has reached them all.
  std::vector<std::string> peers;
  /// The attempt is over for this host (its gang lost a part, or was stopped): it exits.
  std::string stop;
  MSGPACK_DEFINE_MAP(kill_ranks, peers, stop);
};

/// app_ready: an app host's ranks run; `actors[i]` is the actor type of `ranks[i]`.
struct app_ready_request {
  std::vector<int32_t> ranks;
  std::vector<std::string> actors;
  int32_t pid = 0;
  std::string attempt; ///< set by the gateway from the session
  /// host:port where the host's rank directory listens (a gang on several nodes: the other
  /// hosts reach its ranks there); "" for a gang on one host.
  std::string endpoint;
  MSGPACK_DEFINE_MAP(ranks, actors, pid, attempt, endpoint);
};

/// peer_ckpt_push: the sender keeps `piece` and serves it at `endpoint` (its blob server)
/// for `ticket`; the receiver fetches it over a plain socket, checks it and stores it
/// durably before it answers `true`. Idempotent: a piece already here is answered at once.
struct ckpt_push_request {
  ckpt::manifest piece;
  std::string endpoint;
  std::string ticket;
  MSGPACK_DEFINE_MAP(piece, endpoint, ticket);
};

/// peer_ckpt_list: the pieces of `job` a node has (its newest steps), each fetchable with
/// its ticket at the node's blob server (`endpoint`).
struct ckpt_list_request {
  std::string job;
  MSGPACK_DEFINE_MAP(job);
};

struct ckpt_offer {
  ckpt::manifest piece;
  std::string ticket;
  MSGPACK_DEFINE_MAP(piece, ticket);
};

struct ckpt_list_reply {
  std::string node;
  std::string endpoint;
  std::vector<ckpt_offer> pieces;
  MSGPACK_DEFINE_MAP(node, endpoint, pieces);
};

/// checkpoints: one piece of a job's checkpoints and the alive members that hold it.
struct ckpt_status_piece {
  ckpt::manifest piece;
  std::vector<std::string> nodes;
  MSGPACK_DEFINE_MAP(piece, nodes);
};

/// checkpoints' answer (request: ckpt_list_request): the pieces of the job's newest steps
/// that the alive members hold, newest first, and the step a new attempt would resume at.
struct ckpt_status_reply {
  std::vector<ckpt_status_piece> pieces;
  int64_t complete_step = -1; ///< the newest complete step (-1: none)
  int32_t asked = 0;          ///< alive members asked (this node included)
  int32_t answered = 0;
  MSGPACK_DEFINE_MAP(pieces, complete_step, asked, answered);
};

/// ship_have: how many alive members hold each bundle (by SHA-256), in the same order.
struct ship_have_request {
  std::vector<std::string> sha256;
  MSGPACK_DEFINE_MAP(sha256);
};

struct ship_have_reply {
  std::vector<int32_t> holders;
  MSGPACK_DEFINE_MAP(holders);
};

/// peer_store_refs: entries of a node's checkpoint store (a job id's text, or a bundle's
/// `ship-<sha256>`) that no job record there refers to any more; the answer names those a
/// record on the asked node refers to (the job's own, its `checkpoint_from`, its shipments).
struct store_refs_request {
  std::vector<std::string> names;
  MSGPACK_DEFINE_MAP(names);
};

struct store_refs_reply {
  std::vector<std::string> used;
  MSGPACK_DEFINE_MAP(used);
};

/// ship_put: bytes [offset, offset + data.size()) of the bundle `sha256` (`total` bytes),
/// in order, under the client's `upload` id. The chunk that completes it is answered once
/// the bundle's hash is checked and it is stored on `nodes` (this node and up to two more
/// alive members).
struct ship_put_request {
  std::string sha256;
  std::string upload;
  std::string label; ///< "workdir /home/me/proj", for the node's log
  uint64_t total = 0;
  uint64_t offset = 0;
  std::string data;
  MSGPACK_DEFINE_MAP(sha256, upload, label, total, offset, data);
};

struct ship_put_reply {
  uint64_t received = 0;
  bool stored = false;
  std::vector<std::string> nodes;
  MSGPACK_DEFINE_MAP(received, stored, nodes);
};

/// ship_get: bytes [offset, offset + max) of the stored blob `sha256` (a shipped bundle or
/// a job's uncommitted diff, docs/reproduce.md), taken from any alive member that holds it.
/// `max` is at most 1 MiB; `total` is the blob's size.
struct ship_get_request {
  std::string sha256;
  uint64_t offset = 0;
  uint64_t max = 1 << 20;
  MSGPACK_DEFINE_MAP(sha256, offset, max);
};

struct ship_get_reply {
  uint64_t total = 0;
  std::string data;
  MSGPACK_DEFINE_MAP(total, data);
};

/// app_checkpoint: the host's ranks `ranks` saved `step` (files `rank-R` under the attempt's
/// checkpoint directory, `.save/<step>`); answered with how many nodes hold the piece once
/// every alive holder of the job stored it. The gateway sets `attempt` from the session.
struct app_checkpoint_request {
  int64_t step = 0;
  std::vector<int32_t> ranks;
  std::string attempt;
  MSGPACK_DEFINE_MAP(step, ranks, attempt);
};

struct app_checkpoint_reply {
  int32_t copies = 0;
  std::vector<std::string> nodes;
  MSGPACK_DEFINE_MAP(copies, nodes);
};

/// peer_lease: the owner of a gang asks a node to hold slots for `workers` of its workers
/// until `ttl_ms` from now (or, with `release`, gives lease `lease` back).
struct lease_request {
  std::string from;
  std::string job;
  std::string lease; ///< chosen by the owner, unique per placement round
  int32_t priority = 0;
  int64_t submitted_ms = 0;
  int32_t cpus = 0; ///< for all its workers on the node
  int64_t mem_mb = 0;
  int32_t gpus = 0;
  int64_t gpu_mem_mb = 0;
  std::vector<std::string> tags;
  int32_t workers = 0;
  double timeout_s = 0;
  int64_t ttl_ms = 0;
  bool release = false;
  MSGPACK_DEFINE_MAP(from, job, lease, priority, submitted_ms, cpus, mem_mb, gpus, gpu_mem_mb,
                     tags, workers, timeout_s, ttl_ms, release);
};

/// The answer to peer_lease and peer_gang_start.
struct lease_reply {
  bool granted = false;
  std::string reason;     ///< why not
  std::string host;       ///< the node's host (MASTER_ADDR when rank 0 runs there)
  int32_t free_port = 0;  ///< a port free there now (MASTER_PORT when rank 0 runs there)
  MSGPACK_DEFINE_MAP(granted, reason, host, free_port);
};

/// peer_gang_start: run `ranks` of the record's current attempt under lease `lease`.
struct gang_start_request {
  std::string from;
  std::string lease;
  job_record record;
  std::vector<int32_t> ranks;
  std::string master_addr; ///< rank 0's host and port (gang command jobs)
  int32_t master_port = 0;
  int32_t group = 0;   ///< the part's index among the gang's parts (GROUP_RANK)
  std::string token;   ///< the gang's secret: an app host shows its ranks only to holders
  MSGPACK_DEFINE_MAP(from, lease, record, ranks, master_addr, master_port, group, token);
};

/// What the owner tells one of its parts with a poll.
struct part_order {
  std::string job;
  std::string attempt; ///< attempt id text
  bool stop = false;
  std::string why;
  std::vector<std::string> peers; ///< every host's rank directory, once all are ready
  std::vector<int32_t> kill_ranks; ///< `monkey kill .../rank-R` of ranks hosted there
  MSGPACK_DEFINE_MAP(job, attempt, stop, why, peers, kill_ranks);
};

struct gang_poll_request {
  std::string from;
  std::vector<part_order> parts;
  MSGPACK_DEFINE_MAP(from, parts);
};

/// How a part runs: "running", "ended" (with its outcome), or "unknown" (this node has no
/// such part: never started, or lost with a restart).
struct part_status {
  std::string job;
  std::string attempt;
  std::string state;
  std::string outcome;
  std::string cause;
  int32_t exit_code = -1;
  int32_t term_signal = 0;
  int64_t max_rss_kb = 0;
  double cpu_s = 0;
  std::string endpoint;
  std::vector<int32_t> ranks;
  std::vector<std::string> actors;
  int32_t pid = 0;
  MSGPACK_DEFINE_MAP(job, attempt, state, outcome, cause, exit_code, term_signal, max_rss_kb,
                     cpu_s, endpoint, ranks, actors, pid);
};

struct gang_poll_reply {
  std::vector<part_status> parts;
  MSGPACK_DEFINE_MAP(parts);
};

/// remove: final jobs (full ids) to delete from every member, with their logs and metrics.
struct remove_request {
  std::vector<job_id> ids;
  MSGPACK_DEFINE_MAP(ids);
};

struct remove_reply {
  std::vector<job_id> removed;      ///< deleted on every member that answered
  std::vector<std::string> refused; ///< "ID: why" (not final somewhere, being confirmed)
  /// Members that were not reached (down, suspect, no answer): they delete the jobs when
  /// they return, told by a member that has the tombstone.
  std::vector<std::string> unreached;
  MSGPACK_DEFINE_MAP(removed, refused, unreached);
};

/// peer_forget: delete these jobs here (record, transitions, metrics, logs) and keep a
/// tombstone so that no copy brings them back.
struct forget_request {
  std::string from;
  std::vector<job_id> ids;
  MSGPACK_DEFINE_MAP(from, ids);
};

struct forget_reply {
  std::vector<job_id> forgotten;     ///< deleted now or before (tombstone)
  std::vector<std::string> refused;  ///< "ID: why" for the ids kept
  MSGPACK_DEFINE_MAP(forgotten, refused);
};

/// peer_reserve's answer: whether the asked node took the job over (and runs it now).
struct reserve_reply {
  bool granted = false;
  std::string reason; ///< why not
  MSGPACK_DEFINE_MAP(granted, reason);
};

/// peer_replicate: records a replica stores (the owner's every transition).
struct replicate_request {
  std::string from;
  std::vector<job_record> records;
  MSGPACK_DEFINE_MAP(from, records);
};

/// The holder's answer: its own copies that are newer than what was sent (the job was
/// adopted by another owner meanwhile, in a later ownership term). A sender whose final
/// state meets a newer copy does not commit it: the first final state committed on the
/// holders stands.
/// Anti-entropy (docs/cluster.md): a page of the records the answering node owns or holds
/// that list `from` among their holders, ids after `after`, at most `limit`.
struct digest_request {
  std::string from;
  std::string after; ///< job id text; "" = from the start
  uint32_t limit = 512;
  MSGPACK_DEFINE_MAP(from, after, limit);
};

struct digest_entry {
  job_id id;
  uint64_t version = 0;
  bool final = false;  ///< the copy is in a final state (it stands over any that is not)
  std::string owner;   ///< the copy's owner (equal versions: the lower owner id stands)
  MSGPACK_DEFINE_MAP(id, version, final, owner);
};

struct digest_reply {
  std::vector<digest_entry> entries; ///< ascending ids
  bool more = false;                 ///< another page follows
  MSGPACK_DEFINE_MAP(entries, more);
};

struct fetch_request {
  std::string from;
  std::vector<job_id> ids;
  MSGPACK_DEFINE_MAP(from, ids);
};

struct replicate_reply {
  std::vector<job_record> newer;
  MSGPACK_DEFINE_MAP(newer);
};

struct submit_reply {
  std::vector<job_id> ids;
  bool duplicate = false;
  MSGPACK_DEFINE_MAP(ids, duplicate);
};

/// A batch of `count` tasks of a built-in kind (runtime/tasks.hpp).
struct submit_tasks_request {
  std::string kind;
  uint64_t count = 0;
  uint64_t arg = 0;
  int32_t priority = 0;
  std::string client_key;
  std::string user;
  std::string host;
  MSGPACK_DEFINE_MAP(kind, count, arg, priority, client_key, user, host);
};

struct submit_tasks_reply {
  job_id id;
  bool duplicate = false;
  MSGPACK_DEFINE_MAP(id, duplicate);
};

/// Answered with a task_batch_status once every task of the batch is final and durable,
/// or after `timeout_ms` (at most 60 s) with the progress so far; 0: at once.
struct wait_tasks_request {
  std::string id; ///< full id or a unique suffix of at least 6 characters
  uint32_t timeout_ms = 0;
  MSGPACK_DEFINE_MAP(id, timeout_ms);
};

struct task_list_reply {
  std::vector<task_batch_status> batches;
  MSGPACK_DEFINE_MAP(batches);
};

/// `nodes`: the cluster's members as this node sees them.
struct nodes_reply {
  std::string self; ///< the answering node's id
  std::vector<member> members;
  uint32_t agreed = 0;       ///< size of the last agreed member list
  uint32_t agreed_alive = 0; ///< of which alive in the answering node's view
  MSGPACK_DEFINE_MAP(self, members, agreed, agreed_alive);
};

/// peer_join: a node introduces itself to any live member and gets the member list back.
struct peer_join_request {
  member self;
  MSGPACK_DEFINE_MAP(self);
};

/// peer_ping: a probe; both directions carry piggybacked membership updates.
struct peer_ping_request {
  std::string from;
  std::string to; ///< the node id the sender means to reach (a restarted port is not it)
  std::vector<member> updates;
  MSGPACK_DEFINE_MAP(from, to, updates);
};

struct peer_ack {
  std::string from;
  std::vector<member> updates;
  MSGPACK_DEFINE_MAP(from, updates);
};

/// peer_ping_req: "probe `target` for me" (an indirect probe), answered with its ack.
struct peer_ping_req_request {
  std::string from;
  member target;
  std::vector<member> updates;
  MSGPACK_DEFINE_MAP(from, target, updates);
};

struct list_request {
  list_request() = default;
  list_request(std::string state, uint32_t limit) : state(std::move(state)), limit(limit) {}
  std::string state; ///< filter; empty: all
  uint32_t limit = 0; ///< 0: no limit (newest last)
  bool local = false; ///< only this node's records (a peer asks; no fan-out)
  std::string key;    ///< only the jobs of this client key (a retried submit's lookup)
  std::string id;     ///< only the jobs whose id ends with this text (resolving a suffix)
  bool metrics = false; ///< fill each row's last metric values (from the node that ran it)
  std::string sweep;    ///< only the trials of this sweep (its driver job's full id)
  MSGPACK_DEFINE_MAP(state, limit, local, key, id, metrics, sweep);
};

struct job_summary {
  job_id id;
  std::string name;
  job_state state = job_state::queued;
  int32_t attempts = 0;
  int32_t priority = 0;
  int32_t cpus = 0;
  int32_t gpus = 0;
  int64_t submitted_ms = 0;
  int64_t updated_ms = 0;
  int32_t exit_code = -1;
  std::string reason;
  std::string owner;   ///< node id of the job's owner
  std::string ran_on;  ///< node id of the last attempt's node ("" before any)
  uint64_t version = 0;
  std::vector<std::string> holders; ///< node ids holding the record (the owner first)
  /// Listed from memory: every holder of the record is down, so no answer carried it
  /// ("unavailable (replicas down)"); it returns when a holder restarts on its data.
  bool unavailable = false;
  bool final = false; ///< in a final state (a final copy stands over any that is not)
  std::map<std::string, std::string> params;
  std::map<std::string, double> metrics; ///< last value of each key (list_request.metrics)
  std::string sweep;  ///< a trial's sweep ("" otherwise)
  int32_t trial = -1; ///< its number in the sweep
  bool driver = false; ///< a sweep's driver job
  /// Points of each key, every rank and attempt (list_request.metrics; merged over the
  /// members by the largest): a sweep's driver reads a trial's points only when it grew.
  std::map<std::string, int64_t> metric_counts;
  MSGPACK_DEFINE_MAP(id, name, state, attempts, priority, cpus, gpus, submitted_ms, updated_ms,
                     exit_code, reason, owner, ran_on, version, holders, unavailable, final,
                     params, metrics, sweep, trial, driver, metric_counts);
};

struct list_reply {
  std::vector<job_summary> jobs;
  std::vector<std::string> unreachable; ///< members that did not answer: the list is partial
  /// Members declared dead or gone: jobs held only by them are not shown (unless this node
  /// listed them before: then they appear as "unavailable").
  std::vector<std::string> dead;
  MSGPACK_DEFINE_MAP(jobs, unreachable, dead);
};

/// show, cancel and why: a full id or a unique suffix of at least 6 characters.
struct id_request {
  std::string id;
  bool local = false; ///< only this node (a peer asks; no fan-out)
  std::string metric = {}; ///< show: also this metric's points (`show --metric KEY`)
  /// cancel: stop the job early instead (a sweep's trial): it ends `stopped`, not
  /// `cancelled` (SIGTERM, SIGKILL after the grace period, as for a cancel).
  bool stop = false;
  MSGPACK_DEFINE_MAP(id, local, metric, stop);
};

struct show_reply {
  job_record record;
  std::map<std::string, double> last_metrics;
  std::string why; ///< for a queued job
  std::map<std::string, metric_stats> metric_history; ///< per key: count, first, min, max, last
  std::vector<metric_point> series; ///< the points of id_request.metric, in order
  MSGPACK_DEFINE_MAP(record, last_metrics, why, metric_history, series);
};

struct text_reply {
  std::string text;
  MSGPACK_DEFINE_MAP(text);
};

struct logs_request {
  std::string id;
  int32_t attempt = 0;     ///< 1-based; 0: the latest
  std::string stream = "out"; ///< "out" or "err"
  uint64_t offset = 0;
  uint32_t max_bytes = 65536;
  bool local = false;
  int32_t rank = -1; ///< an app job's rank: that rank's log (`logs --rank R`)
  /// Between nodes: read the log of a gang part this node ran (full job id, attempt set),
  /// without its record (the gang's owner asks the node that hosts the rank).
  bool part = false;
  MSGPACK_DEFINE_MAP(id, attempt, stream, offset, max_bytes, local, rank, part);
};

struct logs_reply {
  std::string data;
  uint64_t offset = 0; ///< where the next request starts
  int32_t attempt = 0;
  int32_t attempts = 0;  ///< how many attempts the job has so far
  bool finished = false;  ///< this attempt has ended and `data` reached the end
  bool job_final = false; ///< the job has ended: no further attempt will come
  MSGPACK_DEFINE_MAP(data, offset, attempt, attempts, finished, job_final);
};

struct device_row {
  std::string name;
  std::string kind;
  std::string model;
  int32_t slots = 0;
  int32_t free_slots = 0;
  int64_t memory_mb = 0;
  double gflops = 0;
  MSGPACK_DEFINE_MAP(name, kind, model, slots, free_slots, memory_mb, gflops);
};

struct status_reply {
  std::string node;
  uint32_t incarnation = 0;
  std::string address;
  int32_t pid = 0;
  int64_t started_ms = 0;
  std::string version;
  bool accepting = true;
  std::map<std::string, int64_t> jobs_by_state;
  int32_t cpus_total = 0;
  int32_t cpus_free = 0;
  int32_t gpus_total = 0;
  int32_t gpus_free = 0;
  int64_t mem_total_mb = 0;
  int64_t mem_free_mb = 0;
  std::vector<device_row> devices;
  uint64_t tasks_queued = 0;    ///< tasks waiting for a device proxy
  uint64_t tasks_in_flight = 0; ///< chunks handed to device proxies
  /// Sizes of the node's in-memory tables (jobs owned and held, client keys, offers, ...):
  /// each is bounded or pruned; tests check that they shrink.
  std::map<std::string, int64_t> sizes;
  MSGPACK_DEFINE_MAP(node, incarnation, address, pid, started_ms, version, accepting,
                     jobs_by_state, cpus_total, cpus_free, gpus_total, gpus_free, mem_total_mb,
                     mem_free_mb, devices, tasks_queued, tasks_in_flight, sizes);
};

} // namespace monkey

MSGPACK_ADD_ENUM(monkey::verb);
