// SPDX-License-Identifier: Apache-2.0
#pragma once
// How fmnist splits each step's global batch among its workers (issue #12; docs/fmnist.md,
// "The pseudo-homogeneous split"): equally, or in proportion to each worker's speed —
// first the devices' measured GEMM speed, then the measured compute time of the steps — so
// that unlike devices finish each step together. Every worker computes the same shares
// from the same figures (they reach every worker with the step's statistics), so no
// message decides them. Also how the parameter servers split the parameters (ps_layout).
// Plain C++: no CAF (split.test.cpp).

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace monkey::fmnist {

/// `batch` rows split evenly: the first batch % n workers one more.
std::vector<int> equal_shares(int batch, int n);

/// `batch` rows in proportion to `speed` (any positive unit), by largest remainder (ties
/// to the lower worker), every worker at least one row (batch ≥ workers); speeds that are
/// not positive count as the mean of the others (or all equal when none is).
std::vector<int> proportional_shares(int batch, const std::vector<double>& speed);

/// Where each worker's rows start in the global batch (the shares' prefix sums).
std::vector<int> offsets_of(const std::vector<int>& shares);

/// "128/128" — the shares as recorded with the job.
std::string shares_text(const std::vector<int>& shares);

/// Follows the workers' speed in rows per second of compute over a window of steps and
/// says when the shares should change. Deterministic: the same observations give the same
/// decisions on every worker.
class speed_split {
public:
  /// `initial`: each worker's device speed (GFLOP/s; 0: unknown), `every`: steps between
  /// rebalances, `tolerance`: the least relative change of any share worth a rebalance.
  /// The first `warmup` observations are not counted (a first step also pays for its
  /// threads starting and its memory being touched).
  speed_split(int batch, std::vector<double> initial, int every = 20, double tolerance = 0.1,
              int warmup = 3);

  const std::vector<int>& shares() const { return shares_; }
  /// Goes on from `shares` (a checkpoint's); ignored when they do not fit the batch.
  void resume(const std::vector<int>& shares);
  /// One step's compute time per worker with the current shares. True when the shares
  /// changed (they apply from the next step). Each window's speeds (rows per second) are
  /// averaged with the windows before (half weight each), so noise does not move them.
  bool observe(const std::vector<double>& compute_s);

private:
  int batch_, every_;
  double tolerance_;
  std::vector<int> shares_;
  std::vector<double> rows_, seconds_; ///< per worker over the window
  std::vector<double> speed_;          ///< per worker, smoothed over the windows
  int seen_ = 0;
  int warmup_ = 0;
};

/// ps-async's split by speed, decided by the server of shard 0 (docs/fmnist.md, "The
/// pseudo-homogeneous split"). Its workers are never at the same step, so a step's compute
/// times count once every worker has pushed that step (in step order: the same decisions
/// for the same pushes), and new shares apply from a step no worker has started yet: the
/// latest step pushed + 2 (a worker that pushed step p may already compute p + 1 from an
/// earlier reply; every worker hears of the change in the replies to its pushes before it
/// gets there). Steps pushed before a change applies are not counted (their rows are the
/// old shares'), so one change is in flight at a time.
class async_split {
public:
  async_split(int batch, int workers, int every = 20, double tolerance = 0.1, int warmup = 3);
  /// Worker `w` pushed `step`, computed on `rows` rows in `compute_s`. True when this made
  /// new shares (from(), shares()).
  bool pushed(int w, int64_t step, double compute_s, int rows);
  /// Worker `w` ended: its later steps never come, so nothing more is decided.
  void ended(int w);
  /// The step the latest shares apply from; -1 before any change.
  int64_t from() const { return from_; }
  const std::vector<int>& shares() const { return shares_; }

private:
  int batch_, workers_, every_, warmup_;
  double tolerance_;
  std::unique_ptr<speed_split> split_; ///< made from the first step every worker pushed
  struct step_times {
    std::vector<double> compute;
    std::vector<int> rows;
    int have = 0;
  };
  std::map<int64_t, step_times> steps_;
  std::vector<int64_t> last_; ///< per worker, its latest step pushed (-1: none)
  int64_t from_ = -1;
  std::vector<int> shares_;
  bool over_ = false;
};

/// Recorded shares replayed (`--set shares=STEP:R/R/...;STEP:...`, what `monkey reproduce`
/// passes from a run's `share` points): from each STEP on, the workers get those rows; steps
/// before the first entry get equal shares. No measured speed moves them.
class share_schedule {
public:
  /// Parses `text` for `workers` workers and a global batch of `batch` rows; the failure
  /// names the entry that is wrong (steps not rising, a share count other than the
  /// workers', shares not adding up to the batch, a worker without a row).
  static std::pair<share_schedule, std::string> parse(const std::string& text, int batch,
                                                      int workers);
  bool empty() const { return entries_.empty(); }
  /// The shares of `step`.
  std::vector<int> at(int64_t step) const;
  size_t changes() const { return entries_.size(); }

private:
  int batch_ = 0, workers_ = 0;
  std::vector<std::pair<int64_t, std::vector<int>>> entries_; ///< by rising step
};

/// Where the shards live and how they are updated.
struct ps_layout {
  int32_t workers = 1;
  int32_t servers = 1;
  bool dedicated = false;
  bool async = false;
  int64_t staleness = 0; ///< ps-async: how many steps a worker may run ahead of the slowest
  uint64_t params = 0;   ///< the model's parameter count

  /// The rank that runs server `s`.
  int32_t host_of(int32_t s) const { return dedicated ? workers + s : s % workers; }
  /// The servers rank `r` runs (colocated: s % workers == r; dedicated: r - workers).
  std::vector<int32_t> hosted_by(int32_t r) const;
  /// Shard `s`: [first, first + count) of the flat parameters.
  struct range {
    uint64_t first = 0, count = 0;
  };
  range shard(int32_t s) const;
};

} // namespace monkey::fmnist
