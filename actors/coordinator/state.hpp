// SPDX-License-Identifier: Apache-2.0
#pragma once
// The coordinator's state and the functions its handlers are split into (one .cpp per
// concern). Internal to actors/coordinator/: included only by its .cpp files.
//
//   coordinator.cpp   the behavior: message table, start, tick, restarts, shutdown
//   writes.cpp        journal writes, replication, the commit of final states
//   attempts.cpp      placement, attempt start and end, workers, cancel, fencing
//   submit.cpp        submissions: routing to the owner, acceptance, client keys
//   cluster.cpp       membership changes, adoption, sync, replicas, anti-entropy, recovery
//   offers.cpp        placement across nodes (reservations) and drain
//   verbs.cpp         the local client verbs: show, why, logs, cancel, list, status

#include <chrono>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/all.hpp>

#include "actors/coordinator/coordinator.hpp"
#include "actors/coordinator/job_book.hpp"
#include "actors/coordinator/metric_outbox.hpp"
#include "actors/coordinator/replica_rules.hpp"
#include "actors/messages.hpp"

#include "actors/worker.hpp"
#include "runtime/wire/atoms.hpp"
#include "runtime/wire/envelope.hpp"
#include "runtime/errc.hpp"
#include "runtime/logging.hpp"
#include "runtime/membership.hpp"
#include "runtime/wire/messages/client.hpp"
#include "runtime/placement.hpp"
#include "runtime/gang_rules.hpp"

namespace monkey {

namespace atoms {
/// The coordinator's timer for a round of the checkpoint store's collection.
using store_gc = caf::atom_constant<caf::atom("m_stgc")>;
} // namespace atoms

/// Timeouts of node-to-node requests (docs/cluster.md, Back-pressure).
namespace peer_timeout {
constexpr auto forward = std::chrono::seconds(4);
constexpr auto replicate = std::chrono::seconds(5);
constexpr auto fetch = std::chrono::seconds(5);
constexpr auto reserve = std::chrono::seconds(3);
constexpr auto query = std::chrono::seconds(10);
} // namespace peer_timeout

/// How long attempt outcomes wait after this process was paused (SIGSTOP, swap): long
/// enough for the others' death verdict, if any, to arrive and fence the jobs first.
constexpr int64_t hold_after_pause_ms = 4000;

/// The parts of an owned gang attempt that spans nodes (docs/cluster.md, "Gangs"): the
/// owner polls each part's node, hands the hosts their peers once every one is ready, and
/// ends the attempt when a part ends badly, is lost, or when every part succeeded.
struct gang_run {
  std::vector<gang_part> parts;
  std::map<std::string, part_status> status; ///< per node, from its last poll answer
  std::map<std::string, int> unanswered;     ///< polls in a row without an answer, per node
  std::vector<std::string> peers;            ///< every host's endpoint, once all are ready
  std::map<std::string, std::vector<int32_t>> kill_ranks; ///< per node, for the next poll
  std::string stop; ///< why the parts are being stopped ("" while they run)
  bool polling = false;
};

/// A running attempt of an owned job on this node.
struct run_info {
  int32_t attempt = 0;
  caf::actor worker;
  uint32_t restarts = 0; ///< worker restarts (re-adoptions) of this attempt
  resources use;
  std::vector<int> gpus;
  int64_t end_ms = no_end;
  std::string stop_pending; ///< a stop asked for before the worker existed
  std::string attempt_id;   ///< the attempt's id text (an app host's session names it)
  std::vector<int32_t> app_ranks;      ///< an app host's ranks, from its app_ready
  std::vector<std::string> app_actors; ///< the actor type of each of app_ranks
  std::vector<int32_t> kill_ranks;     ///< ranks to kill, told with the host's next report
  std::shared_ptr<gang_run> gang;      ///< set: the attempt's ranks run on several nodes
};

/// A part of a gang attempt this node runs for the gang's owner (possibly itself).
struct part_run {
  job_id job;
  int32_t number = 0;
  std::string attempt_id;
  std::string owner;
  job_record rec; ///< the record at the start (its holders get the part's metric points)
  std::vector<int32_t> ranks;
  caf::actor worker;
  resources use;
  std::vector<int> gpus;
  int64_t end_ms = no_end;
  part_status status;              ///< state running or ended, outcome, the host's endpoint
  std::vector<std::string> peers;  ///< from the owner: told with the host's next report
  std::vector<int32_t> kill_ranks; ///< from the owner: told with the host's next report
  std::string stop;                ///< asked to stop (why)
  int64_t last_poll_ms = 0;        ///< the owner's last poll (a part it forgot is stopped)
  bool reported = false;           ///< its end was told to the owner
};

/// A lease this node granted and that is not committed yet.
struct lease_info {
  lease_hold hold;
  job_id job;
};

/// A placement round in flight for one queued gang: leases asked of every part's node.
struct gang_round {
  std::vector<gang_part> parts;
  std::string lease;
  std::map<std::string, lease_reply> replies;
  size_t answered = 0;
};

/// How a write of records ended: the local journal's error (if any), the fewest durable
/// copies of any of the records (this node's included), and the copies that holders
/// answered with because they stand over what was sent.
struct persist_result {
  caf::error local;
  size_t copies = 0;
  std::vector<job_record> better;
  std::map<job_id, std::set<std::string>> confirmed; ///< per record: holders that stored it
};

/// Owned records whose acknowledgement waits for every holder's copy: a holder that did
/// not confirm is asked again, and one declared dead meanwhile is replaced by a live member,
/// until `deadline_ms` (failure detection plus a retry; docs/cluster.md, "Submit").
struct copies_wait {
  std::vector<job_id> ids;
  std::map<job_id, std::set<std::string>> confirmed;
  int64_t deadline_ms = 0;
  bool in_flight = false;
  int64_t next_try_ms = 0;
  std::function<void(size_t copies, size_t wanted)> done;
};

/// How long a submission's copies are awaited after the first round of replication.
constexpr int64_t copies_settle_ms = 6000;

/// How the commit of a final state ended.
enum class final_outcome { committed, superseded, failed };

/// A final state that waits for its holders before it is committed here.
struct pending_final {
  job_record before; ///< the record before the final transition (restored by a fence)
  std::vector<std::function<void(final_outcome)>> then;
  bool in_flight = false;
  int tries = 0;
  int64_t next_try_ms = 0;
};

/// A reservation request this node sent and that has not been answered yet.
struct offer {
  std::string target;
  bool unanswered = false; ///< the request timed out: withdraw it before anything else
  int64_t next_withdraw_ms = 0;
};

/// What this node learned of jobs it neither owns nor holds (their dependents wait here).
struct remote_state {
  job_state state = job_state::queued;
  bool exists = true;      ///< false: every alive member answered, and none has it
  int64_t learned_ms = 0;
  bool asking = false;
};

struct coordinator_state {
  coordinator_config cfg;
  caf::actor journal;
  caf::actor membership;
  std::shared_ptr<launcher> launch;
  std::shared_ptr<spdlog::logger> log;
  cluster_view view{""};

  job_book book;
  std::unordered_map<job_id, run_info> running;
  std::set<int> free_gpus;
  std::unordered_map<job_id, pending_final> finals;
  std::set<job_id> tombstones; ///< jobs deleted by `monkey rm`: no copy of them is taken
  std::unordered_map<job_id, remote_state> remote;
  /// Submits waiting for the first one with the same client key.
  std::unordered_map<std::string, std::vector<caf::response_promise>> key_in_flight;
  /// Submissions being journaled and replicated, not yet in the book: a holder's copy of
  /// one that comes back meanwhile (anti-entropy, an echo) is this node's own record in
  /// flight, not a job to take over.
  std::set<job_id> submitting;
  std::list<copies_wait> copy_waits; ///< acknowledgements waiting for holders' copies

  // cluster
  std::set<job_id> adopting;  ///< adoptions waiting for the other members' copies
  bool recheck_members = false; ///< an adoption could not be decided yet: look again soon
  bool synced = false;        ///< own records read back (or fenced) have heard from the cluster
  bool sync_in_flight = false;
  int64_t sync_deadline_ms = 0;
  std::map<std::string, std::string> ae_cursor; ///< per peer: where the next digest page starts
  std::set<std::string> ae_in_flight;
  size_t ae_next = 0;
  uint64_t ticks = 0;

  // placement across nodes
  std::map<job_id, offer> offered;
  std::map<job_id, std::set<std::string>> refused_by;
  struct reservation_request {
    caf::response_promise rp;
    job_record rec;
  };
  std::vector<reservation_request> reservations; ///< gathered for the next round
  std::map<job_id, int64_t> withdrawn;          ///< requests withdrawn by their owner (until)

  // gangs across nodes (gangs.cpp)
  std::map<std::string, lease_info> leases;     ///< granted here, by lease id
  /// Gangs refused a lease here lately, by job: judged ahead of later gangs (their reserved
  /// start) until they stop asking.
  std::map<job_id, std::pair<lease_ask, int64_t>> lease_waiters;
  std::map<std::string, part_run> parts;        ///< run here, by attempt id
  std::map<job_id, gang_round> gang_rounds;     ///< owned gangs being placed
  std::map<job_id, std::string> gang_why;       ///< why an owned gang waits (for `why`)
  std::map<job_id, std::set<std::string>> gang_refused; ///< nodes that refused it lately
  std::map<job_id, int64_t> gang_next_ms;       ///< when its next placement round may start
  struct part_stop {
    std::string node;
    part_order order;
    int64_t until_ms = 0;
  };
  std::vector<part_stop> part_stops; ///< parts of ended gang attempts, told to stop
  uint64_t lease_seq = 0;

  // pauses and fencing
  int64_t last_tick_ms = 0;
  int64_t hold_until = 0;            ///< after a pause: attempt outcomes wait
  std::string fence_cause;           ///< why the last fence happened (for lost attempts)
  std::vector<caf::message> on_hold; ///< started/done messages kept meanwhile

  bool schedule_queued = false;
  int64_t backoff_wake_ms = 0; ///< when a placement is due for a retry's backoff (0: none)
  int64_t gang_wake_ms = 0; ///< when a placement pass is due for a gang's place_after_ms
  metric_outbox metrics_out;   ///< metric points owed to the other holders of jobs run here
  bool accepting = true;
  bool draining = false;     ///< shutdown with --drain: running attempts finish
  bool leaving = false;      ///< `monkey drain`: hands its jobs over, then leaves
  bool leave_signalled = false;
  int custody_pending = -1;  ///< drain: copies of held records not yet acknowledged (-1: none sent)
  std::vector<caf::response_promise> shutdown_waiters;
  int64_t shutdown_deadline_ms = 0; ///< pending final states are waited for until then
  static inline const char* name = "coordinator";

  std::string self_node() const { return cfg.node.str(); }
};

using coordinator_actor = caf::stateful_actor<coordinator_state>;

template <class T>
std::string reply(const T& value) {
  return encode(value);
}

/// Records per replicate message: a page stays far below the frame limit.
constexpr size_t records_per_page = 512;

/// Calls `f(page)` for consecutive pages of `list` (records_per_page records at most).
template <class F>
void for_each_page(const record_list& list, F&& f) {
  for (size_t i = 0; i < list.size(); i += records_per_page) {
    auto last = std::min(list.size(), i + records_per_page);
    f(record_list(list.begin() + static_cast<ptrdiff_t>(i),
                  list.begin() + static_cast<ptrdiff_t>(last)));
  }
}

// ---- writes.cpp ----------------------------------------------------------------------
/// Journals `recs` here; `then` gets the error (none when durable).
void write_local(coordinator_actor* self, record_list recs,
                 std::function<void(const caf::error&)> then);
/// Sends `recs` to their other holders that are alive; `done` gets the fewest copies any
/// record now has (this node's counted as one) and the copies that stood over what was sent.
void replicate(coordinator_actor* self, const record_list& recs,
               std::function<void(persist_result)> done);
/// Copies that holders answered with (they stand over what this node sent): applied like
/// any copy from another node, and journaled.
void apply_better(coordinator_actor* self, const std::vector<job_record>& better);
/// Journals `recs` here, then replicates them; applies copies that stand over them.
void persist(coordinator_actor* self, record_list recs,
             std::function<void(const persist_result&)> then = nullptr);
/// Calls `done(copies, wanted)` once every holder of the owned records `ids` has stored
/// them (`confirmed`: the holders known to have), or at the deadline with the fewest copies
/// any of them has: holders that did not confirm are asked again, and holders declared dead
/// are replaced by live members (so `wanted` is min(R, alive) at the end).
void await_copies(coordinator_actor* self, std::vector<job_id> ids,
                  std::map<job_id, std::set<std::string>> confirmed,
                  std::function<void(size_t copies, size_t wanted)> done);
/// One round of every wait for copies (from the tick).
void check_copy_waits(coordinator_actor* self);
/// Commits the final state the owned record `id` is in: its holders store it first, every
/// one of them (a holder that does not answer is asked again; one declared dead is replaced
/// after every alive member was asked), then the local journal. A holder with a copy that
/// stands over it makes the outcome void (superseded). `then` runs once at the end.
void commit_final(coordinator_actor* self, const job_id& id, job_record before,
                  std::function<void(final_outcome)> then = nullptr);
void retry_finals(coordinator_actor* self);
/// Copies from other nodes: stores, takes over or gives up by the replica rules; `answer`
/// gets this node's copies that stand over what was sent. Returns what to journal.
record_list apply_incoming(coordinator_actor* self, const std::vector<job_record>& records,
                           replicate_reply* answer, bool confirmed = true);
/// Another owner's copy stands over this node's own record: its ownership and any attempt
/// it runs are void; it keeps the better copy as a replica and tells its holders.
void give_up(coordinator_actor* self, const job_record& better, const std::string& why);

// ---- attempts.cpp --------------------------------------------------------------------
void request_schedule(coordinator_actor* self);
void schedule(coordinator_actor* self);
std::string explain_wait(coordinator_state& st, const job_id& id);
/// The owned queue as placement sees it; `doomed` gets jobs whose dependencies can never be
/// met, `next_backoff` the earliest end of a retry backoff still ahead (unchanged if none).
std::vector<queued_job> placement_queue(coordinator_state& st, std::vector<job_id>* doomed,
                                        int64_t* next_backoff = nullptr);
/// The attempts, gang parts and (with `leases`) the uncommitted leases on this node.
std::vector<running_job> placement_running(const coordinator_state& st, bool leases = true);
/// What one worker of the job needs (its tags include the app's build).
resources per_worker(const job_spec& s);
/// What the whole job needs on one node (every worker).
resources need_of(const job_spec& s);
/// The job's log directory on this node (made if missing).
std::string job_log_dir(const coordinator_state& st, const job_id& id);
/// The other alive members with enough CPUs and GPUs for `need` (offers go to them).
std::vector<std::string> members_with_room(const coordinator_state& st, const resources& need);
/// The owned job `id` left its running attempt (`before`: its record until then): queued
/// again or final, its slots free; the next placement runs and the record is committed.
void attempt_ended(coordinator_actor* self, const job_id& id, const job_record& before);
/// `queue` with each own job's submit_seq set to its submit time (the gang order's).
std::vector<queued_job>& by_submit_time(const coordinator_state& st,
                                        std::vector<queued_job>& queue);
void on_started(coordinator_actor* self, const job_id& id, int32_t number,
                const launch_result& res);
void on_done(coordinator_actor* self, const job_id& id, int32_t number,
             const attempt_result& res);
/// True (and the current message kept) while outcomes wait after a pause.
bool hold(coordinator_actor* self);
void release_held(coordinator_actor* self);
void respawn_worker(coordinator_actor* self, const job_id& id);
/// Stops the attempt of `id` running here (its worker, process group and cgroup) and
/// forgets it: its outcome will not be recorded.
/// Returns how many processes it killed.
size_t void_attempt(coordinator_actor* self, const job_id& id, const std::string& why);
void spawn_worker_for(coordinator_actor* self, const job_id& id, worker_args args);
/// MONKEY_CHECKPOINT_DIR of attempt `attempt` of `id` on this node.
std::string checkpoint_dir(const coordinator_state& st, const job_id& id, int32_t attempt);
/// Where an attempt's shipped files are unpacked on this node (docs/shipping.md).
std::string scratch_dir(const coordinator_state& st, const job_id& id, int32_t attempt);
worker_args worker_args_for(const coordinator_state& st, const job_record& rec,
                            const attempt_record& at);
size_t fence_jobs(coordinator_actor* self, const std::string& why);
void maybe_finish_shutdown(coordinator_actor* self);
/// The last known state of a job for its dependents (a final state still being committed
/// counts as running).
std::optional<job_state> known_state(const coordinator_state& st, const job_id& id);
void ask_dependencies(coordinator_actor* self, const std::vector<job_id>& ids);

// ---- submit.cpp ----------------------------------------------------------------------
/// A submission this node is to own (the router chose it, or forwarded it here).
void accept_submit(coordinator_actor* self, caf::response_promise rp, submit_request req);
/// The jobs other alive members know under a client key (then runs once, with what the
/// members that answered in time said).
void jobs_with_key(coordinator_actor* self, const std::string& key,
                   std::function<void(std::set<job_id>)> then);

// ---- cluster.cpp ---------------------------------------------------------------------
void recover(coordinator_actor* self, record_list& recs);
void on_members(coordinator_actor* self);
void try_sync(coordinator_actor* self);
/// Asks every other alive member for its copies of `ids`; `then` gets the copy that stands
/// for each id any member had, and whether every member answered.
void fetch_best(coordinator_actor* self, const std::vector<job_id>& ids,
                std::function<void(std::map<job_id, job_record>, bool)> then);
void on_replicate(coordinator_actor* self, caf::response_promise rp, replicate_request req);
void on_fetch(coordinator_actor* self, caf::response_promise rp, const fetch_request& req);
void on_digest(coordinator_actor* self, caf::response_promise rp, const digest_request& req);
void anti_entropy_step(coordinator_actor* self);
void compact(coordinator_actor* self);
/// One round of the checkpoint store's collection (docs/checkpoints.md, "Collection"):
/// this node's store entries unwritten for `store_keep_ms` that no record on any alive
/// member refers to are removed.
void collect_store(coordinator_actor* self);
/// The store entries one collection round asks the other members about, at most.
constexpr size_t max_store_refs = 4096;
/// peer_store_refs: which of `req.names` the records here refer to.
std::string on_store_refs(const coordinator_state& st, const store_refs_request& req);
/// The holders `rec` should have now (this node first when it owns it).
std::vector<std::string> refreshed_holders(const coordinator_state& st, const job_record& rec);

// ---- offers.cpp ----------------------------------------------------------------------
void offer_queued(coordinator_actor* self);
void withdraw_unanswered(coordinator_actor* self);
void on_reserve(coordinator_actor* self, caf::response_promise rp, replicate_request req);
void reserve_round(coordinator_actor* self);
void on_withdraw(coordinator_actor* self, caf::response_promise rp, const id_request& req);
void on_drain(coordinator_actor* self, caf::response_promise rp, const id_request& req);
void check_drained(coordinator_actor* self);

// ---- gangs.cpp -----------------------------------------------------------------------
/// A job whose workers are placed as a gang (an app job, or a command job of N workers).
bool is_gang(const job_spec& spec);
/// Places queued gangs that the local plan does not start across nodes by leases.
void place_gangs(coordinator_actor* self, const std::vector<queued_job>& queue,
                 const placement_plan& plan);
/// One poll of every owned gang attempt's parts; the stops of ended attempts; the parts
/// this node runs whose owner stopped asking (each tick).
void gang_tick(coordinator_actor* self);
void on_lease(coordinator_actor* self, caf::response_promise rp, const lease_request& req);
void on_gang_start(coordinator_actor* self, caf::response_promise rp, gang_start_request req);
void on_gang_poll(coordinator_actor* self, caf::response_promise rp, const gang_poll_request& req);
/// The part this node runs for attempt `number` of `id`, if any.
part_run* find_part(coordinator_state& st, const job_id& id, int32_t number);
part_run* part_by_attempt(coordinator_state& st, const std::string& attempt);
void on_part_started(coordinator_actor* self, part_run& p, const launch_result& res);
void on_part_done(coordinator_actor* self, part_run& p, const attempt_result& res);
/// Stops every part of the owned gang attempt of `id` (cancel, shutdown).
void stop_gang(coordinator_actor* self, const job_id& id, const std::string& why);
/// Membership changed: gangs with a part on a dead node are lost; parts of dead owners stop.
void gangs_on_members(coordinator_actor* self);
/// Kills every part this node runs (fencing).
size_t void_parts(coordinator_actor* self, const std::string& why);
/// Tells the parts of an owned gang attempt that is given up to stop (void_attempt).
void stop_gang_parts(coordinator_actor* self, const job_id& id, const run_info& run,
                     const std::string& why);
/// Whether attempt `at` of a gang runs (some of) its ranks on other nodes than `self`.
bool spans_nodes(const attempt_record& at, const std::string& self);
/// Other owners' gangs refused a lease here lately, as queued jobs (submit_seq: the submit
/// time): the local plan keeps their reserved start.
/// `except`: a gang left out (the one being judged).
std::vector<queued_job> lease_waiting(const coordinator_state& st, const job_id* except = nullptr);
/// Why a queued gang waits, when placement across nodes knows ("" otherwise).
std::string gang_wait(const coordinator_state& st, const job_id& id);

// ---- metrics.cpp ---------------------------------------------------------------------
/// Sends each holder the metric points gathered for it (one batch in flight per holder, or,
/// with `flush`, everything that waits: an attempt's outcome follows).
void send_metrics(coordinator_actor* self, bool flush = false);
/// Journals the points of jobs held here; the others are dropped.
void store_metrics(coordinator_actor* self, std::vector<metric_point> points);
/// peer_metric_pull: every point of the given jobs held here (at most 65536).
void on_metric_pull(coordinator_actor* self, caf::response_promise rp, const fetch_request& req);
/// Asks `from` for the points of `ids` (copies that just reached this node) and keeps them.
void pull_metrics(coordinator_actor* self, const std::string& from, std::vector<job_id> ids);
/// The jobs of `records` this node has no copy of yet and that have run.
std::vector<job_id> new_with_history(const coordinator_state& st,
                                     const std::vector<job_record>& records);

// ---- verbs.cpp -----------------------------------------------------------------------
// apps.cpp: the verbs of this node's app hosts
void on_app_report(coordinator_actor* self, caf::response_promise rp, app_report_request req);
void on_app_ready(coordinator_actor* self, caf::response_promise rp, const app_ready_request& req);
/// app_checkpoint: an app host's ranks saved a step; answered once the job's holders have it.
void on_app_checkpoint(coordinator_actor* self, caf::response_promise rp,
                       const app_checkpoint_request& req);
/// `kill worker-ID-N/rank-R`: the host is told to kill that rank's actor.
caf::result<std::string> kill_rank(coordinator_actor* self, const std::string& name);

void on_show(coordinator_actor* self, caf::response_promise rp, const id_request& req);
void on_why(coordinator_actor* self, caf::response_promise rp, const id_request& req);
void on_cancel(coordinator_actor* self, caf::response_promise rp, const id_request& req);
void on_logs(coordinator_actor* self, caf::response_promise rp, const logs_request& req);
void on_list(coordinator_actor* self, caf::response_promise rp, const list_request& req);
status_reply make_status(const coordinator_state& st);
job_summary summarize(const job_record& rec);
/// peer_forget: deletes final jobs here (record, transitions, metrics, logs) and keeps their
/// tombstones; answers which were forgotten and which kept (not final here).
void on_forget(coordinator_actor* self, caf::response_promise rp, const forget_request& req);
/// Takes out of `records` the copies of jobs deleted here, and tells `from` (the node that
/// sent them) to delete them too: a node that was down during `monkey rm` learns it so.
void drop_forgotten(coordinator_actor* self, std::vector<job_record>& records,
                    const std::string& from);

} // namespace monkey
