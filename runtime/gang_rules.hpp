// SPDX-License-Identifier: Apache-2.0
#pragma once
// The rules of gang placement across nodes (docs/cluster.md, "Gangs"), as pure functions:
//
//   plan     the owner chooses where the N workers go: all or none, on the fewest nodes,
//            the fastest devices first, its own node first among equals;
//   order    gangs competing for the same slots are decided by one total order: priority
//            (higher first), then submit time, then job id, everywhere in the cluster;
//   leases   a node grants a lease on slots only if its own placement, with the leases it
//            holds and its own queue judged in that order, starts it now; a lease of a
//            later gang that is not committed yet is revoked for an earlier one (so two
//            gangs that each hold part of what both need never wait on each other).
//
// Plain C++: no CAF; gang_rules.test.cpp.

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/placement.hpp"

namespace monkey {

/// Where a gang stands in the cluster-wide order.
struct gang_order {
  int32_t priority = 0;
  int64_t submitted_ms = 0;
  std::string job; ///< job id text (the last tie-break)
};

/// True when `a` goes before `b`.
bool goes_before(const gang_order& a, const gang_order& b);

/// A node as the gang planner sees it.
struct node_room {
  std::string node;
  resources free;  ///< room now (the owner's own node: exact; others: their totals)
  resources total; ///< what it has at all
  bool self = false;
  int32_t speed = 0; ///< device rank: higher is faster (a node with GPUs over a CPU-only one)
};

/// One node's part of a gang: the ranks it hosts.
struct gang_part {
  std::string node;
  std::vector<int32_t> ranks;
};

/// How many workers of `per_worker` fit in `room` (tags must all be offered).
int32_t workers_fitting(const resources& room, const resources& per_worker);

/// What a gang of `workers` workers of `per_worker` takes of a node of `total` that hosts
/// as many of them as fit there (plan_gang fills the node with the most room first, the
/// owner's own among equals): `per_worker` times that many, at most `workers`; the whole
/// gang when none fits. The lease judge counts a node's own queued gang by this share: the
/// whole gang fits no one node and would not hold its place against later gangs' leases.
resources gang_share(const resources& total, const resources& per_worker, int32_t workers);

struct gang_plan {
  std::vector<gang_part> parts; ///< empty: it does not fit now (`why` says why)
  std::string why;
  bool never = false; ///< not even with every live node empty: waits for a node to join
};

/// Places `workers` workers of `per_worker` on `nodes`: fewest nodes first (the node with
/// the most room takes the most workers), then the fastest devices, then the owner's own
/// node, then the node id. Rank 0 goes to the first part.
/// `what` names the workers in the reasons (default: "N workers of C cpus, ...").
gang_plan plan_gang(const resources& per_worker, int32_t workers, std::vector<node_room> nodes,
                    const std::string& what = {});

/// A lease this node holds for a gang's workers.
struct lease_hold {
  std::string id;
  std::string owner;
  gang_order order;
  resources use;
  int64_t expires_ms = 0;
  bool committed = false; ///< its part runs (it is no longer revocable)
};

/// A lease asked of this node.
struct lease_ask {
  gang_order order;
  resources use;
  double timeout_s = 0;
};

struct lease_decision {
  std::vector<size_t> granted;      ///< indices into the asks
  std::vector<std::string> revoked; ///< ids of held leases revoked for earlier gangs
};

/// Judges `asks` (in the gang order) against this node's `running` attempts, the leases
/// it `held`, and its own queue (`own_queue`: submit_seq is the submit time in ms, so
/// that own jobs and gangs from other owners share one order).
lease_decision judge_leases(const resources& total, const std::vector<running_job>& running,
                            const std::vector<lease_hold>& held,
                            const std::vector<queued_job>& own_queue,
                            const std::vector<lease_ask>& asks, int64_t now_ms);

/// "0-1@n1,2-3@n2": a placement as the job record keeps it (attempt hosts, one per part).
std::vector<std::string> hosts_of(const std::vector<gang_part>& parts);

} // namespace monkey
