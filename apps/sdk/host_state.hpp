// SPDX-License-Identifier: Apache-2.0
#pragma once
// The app host's state shared by its ranks' contexts (host.cpp) and their tensors
// (tensors.cpp). Private to the app host library.
#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "monkey/app.hpp"
#include "runtime/apps/schema.hpp"
#include "runtime/dataplane/mesh.hpp"
#include "runtime/ids.hpp"
#include "runtime/job.hpp"

namespace monkey::app {

// ---- the host's shared state ------------------------------------------------------------------

/// The app's schema as `--describe` prints it and nodes check submissions against
/// (definition.cpp).
app_schema schema_of(const definition& d);

struct host_state;

/// A rank's NCCL communicator over a group and the thread that waits on it (gpu.cpp).
struct gpu_group;

/// A new operation's id, and the completion that sends its tensor_done to `target`
/// (tensors.cpp).
std::pair<uint64_t, dp::completion> completion_for(host_state& host, const caf::actor& target);

struct host_state {
  const definition* app = nullptr;
  caf::actor_system* sys = nullptr;
  std::string job, attempt_id;
  monkey::job_id id;
  int32_t attempt = 0;
  uint64_t seed = 0;
  int32_t world = 1;
  std::map<std::string, std::string> params;
  std::string log_out; ///< the attempt's stdout log: rank logs sit beside it
  std::string token;   ///< the gang's secret (a gang across nodes): shown by other hosts
  std::string ckpt_dir;          ///< MONKEY_CHECKPOINT_DIR ("": checkpoints are off)
  int64_t restored_step = -1;    ///< MONKEY_CHECKPOINT_STEP: restored into ckpt_dir
  size_t local_ranks = 0;        ///< how many ranks this host runs
  dp::mesh_options plane_opts;   ///< the data plane's settings (an app that uses it)
  /// Set before any rank starts, replaced on a gang restart (an actor spawned by a rank may
  /// still hold the old one: each call takes its own reference).
  std::shared_ptr<dp::mesh> plane_;
  std::shared_ptr<dp::mesh> plane() const { return std::atomic_load(&plane_); }
  void set_plane(std::shared_ptr<dp::mesh> p) { std::atomic_store(&plane_, std::move(p)); }
  std::atomic<uint64_t> next_op{1};

  std::mutex mtx; ///< guards what follows: ranks report and log from their own threads
  std::vector<caf::actor> peers; ///< entry actor per rank (each set before it starts)
  std::vector<metric_point> points;
  std::map<int32_t, FILE*> logs;
  std::map<int32_t, int32_t> restarts;
  std::map<int64_t, std::set<int32_t>> saved; ///< step → this host's ranks that saved it
  std::vector<int64_t> ready;  ///< steps every rank of this host saved: for the node
  int64_t durable_step = -1;   ///< the newest step the holders stored (its files in .last/)
  /// "rank:member,member,…" → the rank's NCCL group (tensors::gpu_join).
  std::map<std::string, std::shared_ptr<gpu_group>> gpu_groups;

  ~host_state() {
    gpu_groups.clear(); // their threads end before the plane and the logs go
    for (auto& [r, f] : logs)
      if (f)
        std::fclose(f);
  }

  FILE* log_of(int32_t rank) {
    auto& f = logs[rank];
    if (!f && !log_out.empty())
      f = std::fopen(rank_log_path(log_out, rank).c_str(), "a");
    return f;
  }
};

/// Why a rank of `host` has no communicator.
inline std::string no_plane_reason(const host_state& host) {
  return host.app && !host.app->uses_data_plane()
           ? "the app has no data plane: define it with app.data_plane()"
           : "the data plane of this host is not running";
}

} // namespace monkey::app
