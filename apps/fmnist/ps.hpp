// SPDX-License-Identifier: Apache-2.0
#pragma once
// fmnist's parameter servers (issue #12; docs/fmnist.md, "Parameter servers"): the flat
// parameter vector is cut into S contiguous shards, each owned by one server that holds its
// parameters and momentum, sums (ps-sync) or applies one by one (ps-async) the workers'
// gradient pushes, runs SGD on its shard and answers each worker with its new parameters.
//
// Placement: `dedicated`: server s is rank workers + s of its own (the job's gang has S more
// ranks: definition::adds_ranks); `colocated`: worker s % workers hosts server s in a second
// actor of its rank (its own thread), the worker's traffic to it going through the data
// plane's self-sends.
//
// Every frame is a data plane tensor between a worker and a server, under a tag that names
// the shard: a push is a header (float64: step, flags, loss, correct, compute time, rows)
// and the shard's gradients; a reply a header (float64: step, flags, the time the reply
// was held by the staleness bound, the step's loss and correct, samples so far, the step
// new shares apply from, every worker's compute time, the shares) and the shard's
// parameters. In ps-async with split=speed the server of shard 0 decides the shares
// (async_split) and every reply of shard 0 carries the latest. A server first answers every worker
// with its parameters (the start, or the checkpoint's), so workers never hold parameters
// the servers did not send.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <monkey/app.hpp>

#include "apps/fmnist/split.hpp"

namespace monkey::fmnist {

/// A float64 tensor's elements (the headers).
inline double* f64(monkey::app::tensor& t) {
  return static_cast<double*>(t.data());
}

/// Tags of the frames between workers and servers (below the collectives' 2^31).
enum ps_tag : uint32_t {
  push_header = 1u << 24,
  push_grads = 2u << 24,
  reply_header = 3u << 24,
  reply_params = 4u << 24,
};
inline uint32_t ps_tag_for(ps_tag t, int32_t shard) {
  return static_cast<uint32_t>(t) + static_cast<uint32_t>(shard);
}

/// The push header's fields (float64).
enum push_field { p_step, p_flags, p_loss, p_correct, p_compute, p_rows, push_fields };
/// The reply header's fields (float64); then every worker's compute time, then (ps-async
/// with split=speed) the shares that apply from step `r_shares_from` (-1: none yet).
enum reply_field {
  r_step,
  r_flags,
  r_held,
  r_loss,
  r_correct,
  r_samples,
  r_shares_from,
  reply_fields
};
/// The reply header's length for `workers` workers.
inline size_t reply_length(int32_t workers) {
  return reply_fields + 2 * static_cast<size_t>(workers);
}
/// Flags of a push (and, `stop`, of a reply).
enum ps_flag : int {
  flag_stop = 1,  ///< rank 0 reached the target accuracy: every worker stops after this step
  flag_last = 2,  ///< ps-sync: the last step of the run
  flag_done = 4,  ///< ps-async: the worker ended (its gradients are not applied)
  flag_ckpt = 8,  ///< the state after this step is checkpointed: keep a snapshot of it
};

/// What a rank checkpoints: the step it goes on at and the workers' shares of the batch;
/// rank 0 of `single`/`allreduce` also the weights then the momentum; a rank that runs
/// servers their shards' parameters then momentum (raw float32 bytes), by shard.
struct saved_model {
  int64_t step = 0;
  std::vector<float> state;
  std::map<int32_t, std::string> shards;
  std::vector<int> shares;
  MSGPACK_DEFINE_MAP(step, state, shards, shares);
};

/// A colocated server's shard at a checkpointed step, sent to the worker of its rank
/// (which saves it with its own checkpoint).
struct shard_snapshot {
  static constexpr const char* monkey_type = "fmnist.shard";
  int32_t shard = 0;
  int64_t step = 0;
  std::string state;
  MSGPACK_DEFINE_MAP(shard, step, state);
};

/// What a server needs besides its layout.
struct ps_settings {
  ps_layout layout;
  std::vector<int> sizes; ///< the model's layers (its initial parameters)
  uint64_t seed = 0;
  float lr = 0.05f, momentum = 0.9f, weight_decay = 0;
  int batch = 0;           ///< the global batch
  bool split_by_speed = false; ///< ps-async: shard 0's server decides the shares (async_split)
};

/// The actor of rank ctx.rank()'s servers (a dedicated server rank's entry, or the actor a
/// colocated worker spawns). It ends when every worker has ended; an error of its data
/// plane fails it (the gang starts again from its checkpoint).
caf::behavior ps_server(caf::event_based_actor* self, monkey::app::context ctx, ps_settings cfg);

} // namespace monkey::fmnist
