// SPDX-License-Identifier: Apache-2.0
#pragma once
// A running sweep (issue #13; docs/sweeps.md): what its driver job does, round after round —
// follows its trials (ordinary jobs of the cluster) and feeds their metric points to the
// optimizer, stops the trials it says to stop, continues PBT's exploited trials from another
// trial's checkpoint, starts new trials while the budget allows, and saves its whole state
// (the optimizer's and every trial's) so that the driver's next attempt, on any node, goes
// on where this one was. Plain C++: the cluster is an interface (the client verbs, asked of
// the node's router by the sweep's optimizer actor: drive.hpp; a fake in runner.test.cpp).
//
// Exactly the budget's trials, none repeated: trial n is submitted with the client key
// SWEEP-n (a retried submit creates nothing new), and the state naming trial n is saved
// before it is submitted. A driver that goes on from an older state (its last save did not
// reach the job's holders before its node died) finds the trials started after it in the
// cluster and takes them as they are (reconcile).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/expected.hpp"
#include "runtime/job.hpp"
#include "runtime/sweep/optimizer.hpp"
#include "runtime/sweep/sweep_spec.hpp"

namespace monkey::sweep {

/// One job of the sweep as the cluster lists it.
struct trial_job {
  std::string id;
  int32_t trial = -1;
  job_state state = job_state::queued;
  int64_t submitted_ms = 0;
  std::map<std::string, std::string> params;
  /// Points of each metric key the job has (every rank and attempt), where the listing
  /// gives them: a key listed with as many points as the last read of it means nothing new.
  std::map<std::string, int64_t> counts;
  bool counted = false; ///< the listing gave counts (a key it leaves out: no points)
};

/// A job's points of one metric key (rank 0 of its newest attempt, in step order) and how
/// many points of the key the answering member had (every rank and attempt; -1: unknown).
struct metric_read {
  std::vector<std::pair<int64_t, double>> points;
  int64_t count = -1;
};

/// What the runner asks of the cluster.
class cluster {
public:
  virtual ~cluster() = default;
  /// Submits `spec` under client key `key`; the job's id (the existing one's when a job with
  /// that key exists).
  virtual expected<std::string> submit(const job_spec& spec, const std::string& key) = 0;
  /// Every job of the sweep (job_spec::sweep).
  virtual expected<std::vector<trial_job>> jobs() = 0;
  /// The points of `metric` that job `id` reported (rank 0), in step order.
  virtual expected<metric_read> series(const std::string& id, const std::string& metric) = 0;
  /// Stops job `id` early (it ends `stopped`).
  virtual status stop(const std::string& id) = 0;
};

/// One trial as the runner follows it.
struct trial_row {
  int64_t n = 0;
  assignment params;
  std::string job;           ///< its current job ("" while being submitted)
  int32_t segment = 0;       ///< PBT: how often it continued from another's checkpoint
  std::string from;          ///< the job whose checkpoint its current job continues from
  bool ended = false;
  std::string end;           ///< its job's final state
  std::string why;           ///< why the sweep stopped it ("" otherwise)
  int64_t seen = -1;         ///< the last step observed of its current job
  std::optional<double> value; ///< its value (metric.use of its points so far)
  int64_t steps = 0;         ///< points seen
  /// The point counts (metric, resource metric) of the last read of `job`'s points (not
  /// saved: a new driver reads every trial once).
  std::string read_job;
  int64_t read_metric = -1, read_resource = -1;
  int64_t read_ms = 0; ///< when (the round's clock)
};

/// Where a sweep stands.
struct progress {
  int64_t started = 0, ended = 0, running = 0;
  /// Ended trials whose job failed, timed out or was lost; ended ones that count (their job
  /// succeeded, or the sweep stopped it).
  int64_t failed = 0, good = 0;
  /// The sweep failed: more failed trials than max_failed_trials, or every trial failed.
  std::string failure;
  int64_t budget = 0; ///< trials in all (0: until the algorithm is done)
  std::optional<double> best;
  int64_t best_trial = -1;
  bool finished = false;
  std::string stopping; ///< why no more trials start ("" while they do)
};

/// Whether a trial that ended `end` (a final state's name) failed: failed, timed_out, lost.
bool failed_end(const std::string& end);

class runner {
public:
  /// `sweep_id`: the driver job's id (the trials' job_spec::sweep and client keys);
  /// `workdir`: where trials run (the driver's).
  runner(sweep_spec spec, std::string sweep_id, std::string workdir,
         std::unique_ptr<optimizer> opt, cluster& c);

  /// Goes on from a saved state (save()).
  status restore(const std::string& state);
  std::string save() const;
  /// Called with the state whenever it changed, before a trial is submitted and after
  /// results are taken in (the driver saves it as its checkpoint).
  std::function<void(const std::string&)> on_change;
  /// What every trial records to be run again (the sweep's, from `sweep start`).
  std::map<std::string, std::string> provenance;
  /// Who started the sweep, and on which host: every trial records them (`jobs`, `show`).
  std::string user;
  std::string host;
  /// What every trial ships (the bundles `sweep start` stored; docs/shipping.md).
  std::vector<shipment> ship;
  /// Lines for the driver's log ("trial 3 stopped at step 2: ...").
  std::function<void(const std::string&)> on_log;

  /// After a restore: takes in trials the cluster has that the state does not know.
  status reconcile();
  /// One round at wall-clock time `now_ms`: follow, decide, start. An error leaves the
  /// state as it was for the next round (a call that did not get through).
  status round(int64_t now_ms);
  /// Starts no more trials and stops the running ones (`sweep stop`: the job cancelled).
  void stop_all(const std::string& why);
  /// The last round took in no point, started no trial, and the listing showed the same
  /// states and point counts (every key) as the round before (the driver waits longer
  /// before the next).
  bool quiet() const { return quiet_; }
  /// Reads of trials' points so far, and those skipped because the listing showed nothing
  /// new (for the driver's log and the tests).
  int64_t reads() const { return reads_; }
  int64_t skipped_reads() const { return skipped_; }

  progress where() const;
  const std::vector<trial_row>& trials() const { return rows_; }
  const sweep_spec& spec() const { return spec_; }

private:
  void log(const std::string& line) const;
  void changed() const;
  job_spec job_for(int64_t n, const assignment& params, int32_t segment,
                   const std::string& from) const;
  std::string key_for(int64_t n, int32_t segment) const;
  /// A job's parameters without the sweep's fixed ones (trial.params): what was searched.
  assignment searched(assignment params) const;
  /// One new point of `row`'s job: the optimizer's verdict acted on. True when it exploits
  /// (the row then names the continuation to submit).
  bool take_point(trial_row& row, const trial_job& job, int64_t step, double v);
  /// After its new points: the row's value, and its end when its job is final.
  void settle(trial_row& row, const trial_job& job,
              const std::vector<std::pair<int64_t, double>>& points);
  status start_more();
  bool better(double a, double b) const;

  sweep_spec spec_;
  std::string id_, workdir_;
  std::unique_ptr<optimizer> opt_;
  cluster& cluster_;
  std::vector<trial_row> rows_;
  bool exhausted_ = false;  ///< the algorithm has nothing more (a finished grid, PBT done)
  std::string stopping_;    ///< wall budget spent, or stopped
  int64_t started_ms_ = 0;  ///< the sweep's first round (wall clock; for budget.wall)
  bool quiet_ = false;
  uint64_t activity_ = 0; ///< a hash of the last listing's states and point counts
  int64_t reads_ = 0, skipped_ = 0;
};

/// `points` with each step replaced by the value of `resource` (another metric's points) at
/// that step, in resource order; a point without a resource point at its step is left out
/// (algorithm.resource_metric).
std::vector<std::pair<int64_t, double>>
with_resource(const std::vector<std::pair<int64_t, double>>& points,
              const std::vector<std::pair<int64_t, double>>& resource);

/// A trial's value from its points: the last, or the best for `use: best`; none without
/// points.
std::optional<double> value_of(const metric_spec& m,
                               const std::vector<std::pair<int64_t, double>>& points);

} // namespace monkey::sweep
