// SPDX-License-Identifier: Apache-2.0
#pragma once
// The checkpoints actor of a node (docs/checkpoints.md): the node's checkpoint store and
// its blob server. A piece saved here (an app host's ranks at a step, or a command job's
// checkpoint directory) is committed to the store, then pushed to every alive holder of the
// job: each holder fetches it from this node's blob server over a data plane link (ticket
// handed over through CAF; TLS on a --tls cluster) and stores it durably before it answers; the save is answered
// only then. A new attempt restores the newest complete checkpoint found on any alive
// member (or, for a job started `--checkpoint-from` another, that job's).
// Registered as "checkpoints"; the gateway passes it peer_ckpt_push and peer_ckpt_list.
//
// Receives:
//   (ckpt_save, ckpt_save_args)       → ckpt_saved      (workers and the coordinator)
//   (ckpt_restore, ckpt_restore_args) → ckpt_restored   (workers, before the child starts)
//   (ckpt_forget, job_id)                               (the job was deleted)
//   (ship_unpack, ship_unpack_args) → ship_unpacked     (workers, before the child starts)
//   (store_idle, int64_t age_ms) → vector<string>       (the coordinator's collection: the
//                                                        store's entries unwritten that long)
//   (store_drop, vector<string>)                        (entries no job refers to: removed)
//   envelopes: peer_ckpt_push, peer_ckpt_list           (other nodes)
//              ship_have, ship_put, ship_get            (clients: shipped bundles, diffs)
// Shipped bundles (docs/shipping.md) are pieces of the pseudo-job "ship-<sha256>" (step 0,
// one file "bundle"), so they are stored, listed, pushed and pulled as checkpoints are. A
// job's uncommitted diff (docs/reproduce.md) is stored the same way, once per distinct diff.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/fwd.hpp>

#include "runtime/ids.hpp"
#include "runtime/job.hpp"
#include "runtime/net/certs.hpp"

namespace monkey {

constexpr char checkpoints_name[] = "checkpoints";

namespace atoms {
using ckpt_save = caf::atom_constant<caf::atom("m_cksave")>;
using ckpt_restore = caf::atom_constant<caf::atom("m_ckrest")>;
using ckpt_forget = caf::atom_constant<caf::atom("m_ckforg")>;
using store_idle = caf::atom_constant<caf::atom("m_stidle")>;
using store_drop = caf::atom_constant<caf::atom("m_stdrop")>;
using ship_unpack = caf::atom_constant<caf::atom("m_shunpk")>;
} // namespace atoms

struct checkpoints_config {
  std::string node;           ///< this node's id
  std::string root;           ///< the store: <data-dir>/checkpoints
  uint64_t max_bytes = 8ull << 30; ///< the largest piece (--checkpoint-max-mb)
  int keep_steps = 2;         ///< complete steps kept per job
  std::string listen_host;    ///< where the blob server listens (the node's --listen host)
  std::string advertise_host; ///< what other nodes dial ("" : the listen host)
  tls_files tls;              ///< a --tls cluster's node certificate: transfers are TLS
};

/// A piece to save: the plain files of `src` (moved when `move`, else copied).
struct ckpt_save_args {
  job_id job;
  int64_t step = 0;
  std::string src;
  bool move = false;
  std::vector<std::string> holders; ///< the job's holders (the record's replicas)
  std::string label;                ///< "directory", "ranks 0-1"
  int32_t world = 0;                ///< an app's rank count; 0: a command job
};

struct ckpt_saved {
  int64_t step = 0;
  uint64_t bytes = 0;
  std::vector<std::string> nodes; ///< the nodes that hold it now (this one first)
  int64_t ms = 0;                 ///< commit and replication took this long
};

struct ckpt_restore_args {
  job_id job;
  job_id from;      ///< --checkpoint-from: used when `job` has no checkpoint yet (empty: none)
  std::string dest; ///< the files are copied here
};

struct ckpt_restored {
  int64_t step = -1;      ///< -1: no checkpoint found
  job_id source;          ///< whose checkpoint it is (the job, or --checkpoint-from's)
  uint64_t bytes = 0;
  std::string note;       ///< what was looked at, for the log ("3 of 3 members answered")
};

/// Shipped bundles to unpack under `dest` (docs/shipping.md): each is taken from this
/// node's store, or fetched from an alive member that holds it (and kept here: a node
/// fetches a bundle once).
struct ship_unpack_args {
  std::vector<shipment> bundles;
  std::string dest;
};

struct ship_unpacked {
  int64_t files = 0;
  uint64_t bytes = 0;
  int32_t fetched = 0; ///< bundles that came from another node this time
};

caf::actor spawn_checkpoints(caf::actor_system& sys, checkpoints_config cfg);

} // namespace monkey

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(monkey::ckpt_save_args)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(monkey::ckpt_saved)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(monkey::ckpt_restore_args)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(monkey::ckpt_restored)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(monkey::ship_unpack_args)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(monkey::ship_unpacked)
