// SPDX-License-Identifier: Apache-2.0
// allreduce: the data plane as data-parallel training uses it. Every step each rank makes a
// "gradient" tensor, the ranks all-reduce it (ring, over shared memory between processes of
// one machine, TCP between machines, memory inside a host), and each rank adds the sum to
// its "weights". The gradients are small integers, so every rank can check the sum exactly
// and the weights after N steps are known: the app reports any element that differs
// (`mismatches`, 0 when all is well), the all-reduce's time and bandwidth (from this rank's
// call to its end: waiting for a slower rank's gradient counts too), and checkpoints
// its weights every `checkpoint_every` steps; a new attempt (a lost node, a crash) resumes
// from them and checks they are the weights of that step (`resume_ok`). With `device=auto`
// (or `cuda`) the ranks first join NCCL (tensors::gpu_join): when every rank has a GPU they
// all-reduce the gradient in GPU memory with NCCL, else they say why and use host memory
// (`cuda`: the job fails instead).
#include <chrono>
#include <cstring>
#include <memory>

#include <monkey/app.hpp>

#include "devices/compute.hpp"

namespace {

using monkey::app::tensor;
using clock_type = std::chrono::steady_clock;
using next_step = caf::atom_constant<caf::atom("next_step")>;

/// Rank `rank`'s gradient element `k` at `step`: an integer in [-8, 8].
float grad(uint64_t seed, int32_t rank, int64_t step, uint64_t k) {
  uint64_t x = seed ^ (static_cast<uint64_t>(rank) + 1) * 0x9E3779B97F4A7C15ull
               ^ (static_cast<uint64_t>(step) + 1) * 0xC2B2AE3D27D4EB4Full ^ (k + 1) * 0x165667B1ull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return static_cast<float>(static_cast<int64_t>(x % 17) - 8);
}

/// The weights after `steps` steps, as every rank holds them (each step adds every rank's
/// gradient; the sums are small integers, exact in float32 in any order).
void weights_at(float* w, uint64_t n, int64_t steps, uint64_t seed, int32_t world) {
  std::memset(w, 0, n * sizeof(float));
  for (int64_t s = 0; s < steps; ++s)
    for (uint64_t k = 0; k < n; ++k) {
      float sum = 0;
      for (int32_t r = 0; r < world; ++r)
        sum += grad(seed, r, s, k);
      w[k] += sum;
    }
}

struct rank_state {
  int64_t step = 0;
  tensor w, g;
  uint64_t op = 0;
  clock_type::time_point started;
  std::unique_ptr<monkey::devices::compute> gpu; ///< set when the ranks all-reduce with NCCL
  monkey::devices::device_array<float> dev_g;    ///< the gradient in GPU memory
  bool joining = false;                          ///< waiting for gpu_join's answer
};

caf::behavior allreduce_rank(caf::event_based_actor* self, monkey::app::context ctx) {
  auto st = std::make_shared<rank_state>();
  auto n = static_cast<uint64_t>(ctx.param_int("elements"));
  auto steps = ctx.param_int("steps");
  auto every = ctx.param_int("checkpoint_every");
  auto pause = std::chrono::milliseconds(ctx.param_int("step_ms"));
  auto world = ctx.world_size();
  auto dp = ctx.tensors(self);
  st->w = tensor::f32(n);
  st->g = dp.alloc(monkey::app::dtype::f32, n); // in place between the ranks of a machine
  if (auto c = ctx.latest_checkpoint()) {
    int64_t at = 0;
    if (c->data.size() == sizeof(at) + n * sizeof(float)) {
      std::memcpy(&at, c->data.data(), sizeof(at));
      std::memcpy(st->w.data(), c->data.data() + sizeof(at), n * sizeof(float));
      auto want = tensor::f32(n);
      weights_at(want.f32(), n, at, ctx.seed(), world);
      bool same = std::memcmp(want.data(), st->w.data(), want.bytes()) == 0;
      st->step = at;
      ctx.log("resumed at step " + std::to_string(at) + (same ? "" : " (the weights differ!)"));
      ctx.report(at, {{"resumed_at", static_cast<double>(at)}, {"resume_ok", same ? 1.0 : 0.0}});
    } else {
      ctx.log("the checkpoint has another size; starting at 0");
    }
  }
  if (world > 1)
    ctx.log("reaches rank " + std::to_string((ctx.rank() + 1) % world) + " over "
            + dp.transport((ctx.rank() + 1) % world)
            + (dp.registered(st->g) ? " (its tensor in the shared arena)" : ""));
  auto want = ctx.param("device");
  if (want == "cpu") {
    self->send(self, next_step::value);
  } else {
    st->joining = true;
    st->op = dp.gpu_join(0);
  }
  return {
    [=](next_step) {
      if (st->step >= steps) {
        ctx.log("done after " + std::to_string(steps) + " steps");
        self->quit();
        return;
      }
      auto* g = st->g.f32();
      for (uint64_t k = 0; k < n; ++k)
        g[k] = grad(ctx.seed(), ctx.rank(), st->step, k);
      st->started = clock_type::now();
      if (st->gpu) {
        st->dev_g.upload(g, n);
        st->gpu->synchronize(); // NCCL runs on its own stream
        st->op = dp.gpu_allreduce(st->dev_g.get(), monkey::app::dtype::f32, n);
      } else {
        st->op = dp.allreduce(st->g, monkey::app::reduce::sum);
      }
    },
    [=](const monkey::app::tensor_done& d) {
      if (d.op != st->op)
        return;
      if (st->joining) {
        st->joining = false;
        std::string why = d.error;
        if (d.ok()) {
          st->gpu = monkey::devices::make_cuda_compute(0, &why);
          if (st->gpu)
            st->dev_g = monkey::devices::device_array<float>(*st->gpu, n);
        }
        if (st->gpu) {
          ctx.log("all-reduces in GPU memory with NCCL (" + st->gpu->name() + ")");
        } else if (want == "cuda" || d.ok()) { // d.ok(): the others use NCCL; this rank cannot
          self->quit(caf::make_error(caf::sec::runtime_error,
                                     std::string("allreduce: ") + (d.ok() ? "NCCL joined, but " : "device=cuda, but ")
                                       + why));
          return;
        } else {
          ctx.log("all-reduces host memory over the data plane: " + why);
        }
        self->send(self, next_step::value);
        return;
      }
      if (st->gpu && d.ok())
        st->dev_g.download(st->g.f32(), n);
      if (!d.ok()) {
        // The gang's policy restarts it from the newest checkpoint.
        self->quit(caf::make_error(caf::sec::runtime_error, "allreduce: " + d.error));
        return;
      }
      auto secs = std::chrono::duration<double>(clock_type::now() - st->started).count();
      const float* g = st->g.f32();
      float* w = st->w.f32();
      double bad = 0;
      for (uint64_t k = 0; k < n; ++k) {
        float want = 0;
        for (int32_t r = 0; r < world; ++r)
          want += grad(ctx.seed(), r, st->step, k);
        bad += g[k] != want;
        w[k] += g[k];
      }
      ctx.report(st->step, {{"mismatches", bad},
                            {"allreduce_ms", secs * 1e3},
                            {"algbw_GBps", static_cast<double>(n) * 4 / secs / 1e9}});
      st->step += 1;
      if (every > 0 && st->step % every == 0) {
        std::string bytes(sizeof(int64_t) + n * sizeof(float), '\0');
        std::memcpy(bytes.data(), &st->step, sizeof(int64_t));
        std::memcpy(bytes.data() + sizeof(int64_t), w, n * sizeof(float));
        ctx.save_checkpoint(st->step, bytes);
      }
      self->delayed_send(self, pause, next_step::value);
    },
  };
}

monkey::app::definition define() {
  monkey::app::definition app{"allreduce", "ranks all-reduce a gradient every step over the "
                                           "data plane and check the sums exactly"};
  app.int_param("elements", 1000000, 1, 1 << 28, "float32 elements in the tensor");
  app.int_param("steps", 20, 1, 1000000, "steps before the job succeeds");
  app.int_param("step_ms", 0, 0, 600000, "pause between steps (ms)");
  app.int_param("checkpoint_every", 5, 0, 1000000,
                "every rank checkpoints its weights every this many steps (0: never)");
  app.choice_param("device", "auto", {"auto", "cpu", "cuda"},
                   "auto: all-reduce in GPU memory with NCCL when every rank has a GPU "
                   "(--gpus 1), else host memory; cuda: NCCL or fail");
  app.data_plane();
  app.entry("allreduce_rank", allreduce_rank);
  return app;
}

} // namespace

MONKEY_APP(define)
