// SPDX-License-Identifier: Apache-2.0
// NCCL from the SDK (monkey/app.hpp: tensors::gpu_join, gpu_allreduce; docs/dataplane.md,
// "NCCL"). The ranks of a group agree over the host data plane, with two collectives queued
// at the call (so they keep their place among the rank's other collectives): an all-reduce
// counting the members that cannot run NCCL, and a broadcast of the unique id the group's
// first member made. Then each rank's group thread joins the NCCL communicator
// (devices/nccl.hpp) and runs the group's GPU all-reduces in order, each waited for while
// the data plane watches the other members: a dead or frozen member fails the wait instead
// of hanging it.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <thread>

#include "devices/nccl.hpp"
#include "host_state.hpp"

namespace monkey::app {

struct gpu_group {
  std::shared_ptr<dp::mesh> plane; ///< keeps `comm` alive
  dp::communicator* comm = nullptr;
  int32_t rank = 0;
  std::vector<int32_t> members;
  int index = 0;
  int device = 0;

  std::unique_ptr<devices::nccl_comm> nccl; ///< the group thread's only
  std::string failed;                       ///< the join's failure: every call fails with it

  std::mutex m;
  std::condition_variable cv;     ///< work arrived
  std::condition_variable agreed; ///< a collective of the agreement ended
  std::deque<std::function<void()>> work;
  std::atomic<bool> stopping{false};
  std::thread thread;

  // The agreement (both collectives' ends, under m).
  int pending = 2;
  std::string agree_error;
  int32_t cannot = 0;   ///< members that cannot run NCCL
  std::string id;       ///< the broadcast unique id ("" when the first member had none)
  std::string here_why; ///< why this rank cannot ("" when it can)

  ~gpu_group() {
    {
      std::lock_guard<std::mutex> guard{m};
      stopping = true;
    }
    cv.notify_all();
    agreed.notify_all();
    if (thread.joinable())
      thread.join();
  }

  void run() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock{m};
        cv.wait(lock, [&] { return stopping || !work.empty(); });
        if (work.empty())
          return;
        job = std::move(work.front());
        work.pop_front();
      }
      job();
    }
  }

  void post(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> guard{m};
      work.push_back(std::move(job));
    }
    cv.notify_one();
  }

  /// "" while every other member is there (nccl_check).
  std::string check() {
    if (stopping)
      return "NCCL: the app host is stopping";
    for (auto r : members)
      if (r != rank)
        if (auto ok = comm->alive(r); !ok)
          return "NCCL: " + ok.error();
    return {};
  }

  /// The group thread's join, once both collectives ended.
  void join() {
    if (!agree_error.empty()) {
      failed = "NCCL: the ranks could not agree: " + agree_error;
      return;
    }
    if (cannot > 0) {
      failed = "NCCL cannot run on " + std::to_string(cannot) + " of the group's "
               + std::to_string(members.size()) + " ranks"
               + (here_why.empty() ? "" : " (rank " + std::to_string(rank) + ": " + here_why + ")");
      return;
    }
    if (id.empty()) {
      failed = "NCCL: the group's first rank made no unique id";
      return;
    }
    std::string why;
    nccl = devices::nccl_comm::create(id, index, static_cast<int>(members.size()), device, &why,
                                      [this] { return check(); }, comm->timeout());
    if (!nccl)
      failed = why;
  }
};

namespace {

std::string group_key(int32_t rank, const std::vector<int32_t>& members) {
  std::string k = std::to_string(rank) + ":";
  for (auto r : members)
    k += std::to_string(r) + ",";
  return k;
}

std::vector<int32_t> members_of(std::vector<int32_t> group, int32_t world) {
  if (group.empty())
    for (int32_t r = 0; r < world; ++r)
      group.push_back(r);
  return group;
}

/// The rank's communicator in `plane`, or null after failing `done` with why there is none.
dp::communicator* rank_comm(const host_state& host, const std::shared_ptr<dp::mesh>& plane,
                            int32_t rank, const dp::completion& done) {
  auto* comm = plane ? plane->comm(rank) : nullptr;
  if (!comm)
    done(failure{no_plane_reason(host)}, {});
  return comm;
}

} // namespace

uint64_t tensors::gpu_join(int device, std::vector<int32_t> group) const {
  auto [op, done] = completion_for(*host_, target_);
  auto plane = host_->plane();
  auto* comm = rank_comm(*host_, plane, rank_, done);
  if (!comm)
    return op;
  auto members = members_of(std::move(group), comm->world());
  auto it = std::find(members.begin(), members.end(), rank_);
  if (it == members.end()) {
    done(failure{"gpu_join: rank " + std::to_string(rank_) + " is not in the group"}, {});
    return op;
  }
  auto g = std::make_shared<gpu_group>();
  g->plane = plane;
  g->comm = comm;
  g->rank = rank_;
  g->members = members;
  g->index = static_cast<int>(it - members.begin());
  g->device = device;
  std::shared_ptr<gpu_group> stale;
  {
    std::lock_guard<std::mutex> guard{host_->mtx};
    auto& slot = host_->gpu_groups[group_key(rank_, members)];
    if (slot && slot->plane == plane) {
      done(failure{"gpu_join: rank " + std::to_string(rank_)
                   + " has joined an NCCL group of these ranks already"},
           {});
      return op;
    }
    stale = std::move(slot); // of a data plane before a gang restart
    slot = g;
  }
  stale.reset();
  g->thread = std::thread([raw = g.get()] { raw->run(); });

  // What this rank brings: whether it can run NCCL, and (the first member) the unique id.
  g->here_why = devices::nccl_unavailable(device);
  auto id = dp::buffer(dp::dtype::u8, 1 + 128);
  auto* idb = static_cast<uint8_t*>(id.data());
  std::memset(idb, 0, id.bytes());
  if (g->index == 0 && g->here_why.empty()) {
    auto made = devices::nccl_unique_id(&g->here_why);
    if (made.size() == 128) {
      idb[0] = 1;
      std::memcpy(idb + 1, made.data(), 128);
    }
  }
  auto flag = dp::buffer(dp::dtype::i32, 1);
  reinterpret_cast<int32_t*>(flag.data())[0] = g->here_why.empty() ? 0 : 1;

  // The group thread joins once both collectives ended (their ends come from the collective
  // thread); a gpu_allreduce called before that waits behind the join.
  g->post([g = g.get(), done = done] {
    {
      std::unique_lock<std::mutex> lock{g->m};
      g->agreed.wait(lock, [&] { return g->pending == 0 || g->stopping; });
      if (g->pending > 0)
        g->agree_error = "the app host is stopping";
    }
    g->join();
    done(g->failed.empty() ? status{} : status{failure{g->failed}}, {});
  });
  auto ended = [g](const status& st, const std::function<void()>& take) {
    {
      std::lock_guard<std::mutex> guard{g->m};
      if (!st && g->agree_error.empty())
        g->agree_error = st.error();
      else if (st)
        take();
      --g->pending;
    }
    g->agreed.notify_all();
  };
  comm->allreduce(flag, dp::reduce_op::sum, members, [g, ended, flag](const status& st, dp::buffer) {
    ended(st, [&] { g->cannot = reinterpret_cast<const int32_t*>(flag.data())[0]; });
  });
  comm->broadcast(id, members.front(), members, [g, ended, id](const status& st, dp::buffer) {
    ended(st, [&] {
      auto* got = static_cast<const char*>(id.data());
      if (got[0] == 1)
        g->id.assign(got + 1, 128);
    });
  });
  return op;
}

uint64_t tensors::gpu_allreduce(void* device_data, dtype t, uint64_t count, reduce r,
                                std::vector<int32_t> group) const {
  auto [op, done] = completion_for(*host_, target_);
  auto plane = host_->plane();
  auto* comm = rank_comm(*host_, plane, rank_, done);
  if (!comm)
    return op;
  std::shared_ptr<gpu_group> g;
  {
    std::lock_guard<std::mutex> guard{host_->mtx};
    auto it = host_->gpu_groups.find(group_key(rank_, members_of(std::move(group), comm->world())));
    if (it != host_->gpu_groups.end() && it->second->plane == plane)
      g = it->second;
  }
  if (!g) {
    done(failure{"gpu_allreduce: rank " + std::to_string(rank_)
                 + " has not joined an NCCL group of these ranks (call gpu_join first)"},
         {});
    return op;
  }
  g->post([g = g.get(), device_data, t, count, mean = r == reduce::mean, done = done] {
    if (!g->failed.empty()) {
      done(failure{g->failed}, {});
      return;
    }
    auto err = g->nccl->allreduce(device_data, count, t, mean, [g] { return g->check(); },
                                  g->comm->timeout());
    done(err.empty() ? status{} : status{failure{err}}, {});
  });
  return op;
}

} // namespace monkey::app
