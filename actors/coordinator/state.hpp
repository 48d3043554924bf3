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

namespace monkey {

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
  uint64_t attempt_seq = 0;
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

  // pauses and fencing
  int64_t last_tick_ms = 0;
  int64_t hold_until = 0;            ///< after a pause: attempt outcomes wait
  std::string fence_cause;           ///< why the last fence happened (for lost attempts)
  std::vector<caf::message> on_hold; ///< started/done messages kept meanwhile

  bool schedule_queued = false;
  int64_t backoff_wake_ms = 0; ///< when a placement is due for a retry's backoff (0: none)
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
std::vector<running_job> placement_running(const coordinator_state& st);
resources need_of(const job_spec& s);
/// The other alive members with enough CPUs and GPUs for `need` (offers go to them).
std::vector<std::string> members_with_room(const coordinator_state& st, const resources& need);
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
