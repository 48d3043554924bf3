// SPDX-License-Identifier: Apache-2.0
#pragma once
// One attempt of a sweep's driver job, as the node's sweep optimizer actor runs it
// (actors/sweep/sweep_actor.hpp; docs/sweeps.md, "How a sweep runs"): reads the sweep from the
// job's environment, goes on from the job's checkpoint (the runner's saved state) when there
// is one, and runs rounds until the sweep is finished. It speaks to the cluster through the
// client verbs (submit, list, show, cancel), and to its job as a command job's child does:
// `MONKEY_METRIC` lines (its progress) and `MONKEY_CHECKPOINT` lines (its state saved in
// MONKEY_CHECKPOINT_DIR) on its stdout, and lines for the user on its stderr. Plain C++:
// the verbs go through a function (the actor's requests; a fake in drive.test.cpp).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/expected.hpp"
#include "runtime/sweep/runner.hpp"
#include "runtime/wire/messages/client.hpp"

namespace monkey::sweep {

/// Sends one client verb with its encoded body; the reply's body or what went wrong.
using verb_call = std::function<expected<std::string>(verb, const std::string& body)>;

/// The cluster through the client verbs.
class verb_cluster final : public cluster {
public:
  verb_cluster(std::string sweep_id, verb_call call)
      : sweep_(std::move(sweep_id)), call_(std::move(call)) {}
  expected<std::string> submit(const job_spec& spec, const std::string& key) override;
  expected<std::vector<trial_job>> jobs() override;
  expected<metric_read> series(const std::string& id, const std::string& metric) override;
  status stop(const std::string& id) override;

private:
  std::string sweep_;
  verb_call call_;
};

/// The points of a `show` answer's series: rank 0 of the newest attempt, in step order.
std::vector<std::pair<int64_t, double>> newest_series(const show_reply& r);

/// What becomes of a driver attempt after a tick.
struct drive_next {
  bool done = false;
  int code = 0; ///< its exit code when done (0 finished; 143 stopped; 75 no node; 65 failed)
  int64_t pause_ms = 100; ///< when done is false: wait this long before the next tick
};

class driver {
public:
  /// Where its lines go: `out` as a child's stdout (metric and checkpoint lines), `log` as
  /// its stderr (each without the newline).
  struct sinks {
    std::function<void(const std::string&)> out, log;
  };
  /// From the driver job's environment (MONKEY_JOB_ID, MONKEY_SWEEP_FILE, ...;
  /// docs/sweeps.md); `workdir`: the job's working directory. An error says what is wrong
  /// (the optimizer actor then ends the attempt with exit code 64: it fails).
  static expected<std::unique_ptr<driver>> from_env(const std::map<std::string, std::string>& env,
                                                    const std::string& workdir, verb_call call,
                                                    sinks out);

  /// One step: the first ticks reconcile with the cluster, the next run rounds. A verb that
  /// fails is tried again a second later; after 30 s without an answer the attempt ends
  /// (75: the job's next attempt goes on).
  drive_next tick(int64_t now_ms);
  /// Starts no more trials and stops the running ones (the job was cancelled: `sweep stop`).
  void stop() { stop_asked_ = true; }

  const runner& state() const { return *runner_; }

private:
  driver(sweep_spec spec, std::string id, std::string trial_dir, std::unique_ptr<optimizer> opt,
         verb_call call, sinks out);
  void say(const std::string& line) const;
  drive_next failing(int64_t now_ms, const std::string& what);
  void save(const std::string& state);

  sweep_spec spec_;
  verb_cluster cluster_;
  sinks sinks_;
  std::unique_ptr<runner> runner_;
  std::string ckpt_dir_;
  int64_t ckpt_step_ = 0;
  bool reconciled_ = false;
  bool stop_asked_ = false, stopped_ = false;
  int64_t failing_since_ = 0;
  int64_t reports_ = 0, rounds_ = 0, pause_ms_ = 100;
  std::string last_report_;
};

} // namespace monkey::sweep
