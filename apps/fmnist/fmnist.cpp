// SPDX-License-Identifier: Apache-2.0
// fmnist: data-parallel training of an MLP on Fashion-MNIST across the cluster's devices
// (issue #12; docs/fmnist.md). Every rank holds the whole model; each step's global batch
// (`batch`) is split among the ranks, each computes the gradient of its share on its device
// (devices/compute.hpp: OpenBLAS on the CPU, cuBLAS where the worker got a GPU), and:
//
// - `single`: one worker applies its own gradient;
// - `allreduce`: the ranks sum their gradients with the data plane's ring all-reduce, one
//   layer at a time from the last, each layer's all-reduce starting as soon as the backward
//   pass has finished it (overlapped with the layers before it), then every rank applies the
//   same update.
//
// Per step rank 0 reports `loss` and `samples_per_s`; every rank reports where its time went:
// `compute_s` (its forward and backward), `wait_s` (waiting for the slowest rank's
// gradient) and `comm_s` (moving the gradients, the rest of the exchange). Per epoch rank 0
// evaluates the test set: `test_accuracy` and `train_loss`. Checkpoints at every epoch's end
// (and every `checkpoint_every` steps); a new attempt resumes at the step reached.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include <monkey/app.hpp>

#include "apps/fmnist/data.hpp"
#include "apps/fmnist/model.hpp"

namespace {

using monkey::app::tensor;
using namespace monkey::fmnist;
using clock_type = std::chrono::steady_clock;
using next_step = caf::atom_constant<caf::atom("next_step")>;

double seconds_since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

/// The training and test sets, read once per app host (its ranks share them).
struct data_pair {
  dataset train, test;
};

monkey::expected<std::shared_ptr<const data_pair>> shared_data(const std::string& dir) {
  static std::mutex mtx;
  static std::map<std::string, std::shared_ptr<const data_pair>> cache;
  std::lock_guard<std::mutex> guard{mtx};
  if (auto it = cache.find(dir); it != cache.end())
    return it->second;
  auto train = load_split(dir, "train");
  if (!train)
    return monkey::failure{train.error()};
  auto test = load_split(dir, "t10k");
  if (!test)
    return monkey::failure{test.error()};
  auto p = std::make_shared<data_pair>();
  p->train = std::move(*train);
  p->test = std::move(*test);
  cache[dir] = p;
  return std::shared_ptr<const data_pair>(p);
}

/// What a rank checkpoints: the global step it goes on at and, for rank 0, the weights and
/// the momentum (every rank holds the same).
struct saved_model {
  int64_t step = 0;
  std::vector<float> state;
  MSGPACK_DEFINE_MAP(step, state);
};

/// The threads of this worker's BLAS: its CPU slots (the node sets OPENBLAS_NUM_THREADS).
int blas_threads() {
  auto* v = std::getenv("OPENBLAS_NUM_THREADS");
  int n = v ? std::atoi(v) : 1;
  return std::max(1, n);
}

/// "RANK:FACTOR" → the factor for `rank` (1: not throttled).
double throttle_for(const std::string& spec, int32_t rank) {
  if (spec.empty())
    return 1.0;
  auto colon = spec.find(':');
  if (std::atoi(spec.substr(0, colon).c_str()) != rank)
    return 1.0;
  return std::max(1.0, std::atof(spec.substr(colon + 1).c_str()));
}

struct rank_state {
  std::shared_ptr<const data_pair> data;
  std::unique_ptr<monkey::devices::compute> dev;
  std::unique_ptr<mlp> model;
  tensor exchange;       ///< [stats | gradients]: what the all-reduce sums
  size_t stats = 0;      ///< floats ahead of the gradients: loss, correct, stop, one per rank
  std::vector<uint32_t> order;
  int64_t order_epoch = -1;
  int64_t step = 0;      ///< global step
  int64_t steps_per_epoch = 0;
  int share = 0, offset = 0; ///< this rank's rows of each global batch
  std::map<uint64_t, int> pending; ///< all-reduce op → layer
  clock_type::time_point step_start, compute_end, run_start;
  double compute_s = 0;
  double epoch_loss = 0;
  int64_t epoch_steps = 0;
  bool stop_next = false; ///< rank 0: the target was reached, tell the others in the next step
};

caf::behavior fmnist_rank(caf::event_based_actor* self, monkey::app::context ctx) {
  auto st = std::make_shared<rank_state>();
  const auto strategy = ctx.param("strategy");
  const bool single = strategy == "single";
  const auto rank = ctx.rank();
  const auto world = ctx.world_size();
  const auto batch = static_cast<int>(ctx.param_int("batch"));
  const auto epochs = ctx.param_int("epochs");
  const auto lr = static_cast<float>(ctx.param_float("lr"));
  const auto momentum = static_cast<float>(ctx.param_float("momentum"));
  const auto wd = static_cast<float>(ctx.param_float("weight_decay"));
  const auto target = ctx.param_float("target_accuracy");
  const auto every = ctx.param_int("checkpoint_every");
  const auto slow = throttle_for(ctx.param("throttle"), rank);
  const uint64_t seed = ctx.param_int("seed") >= 0 ? static_cast<uint64_t>(ctx.param_int("seed"))
                                                   : ctx.seed();
  auto fail = [self, ctx](const std::string& why) {
    ctx.log("error: " + why);
    self->quit(caf::make_error(caf::sec::runtime_error, why));
  };
  auto dp = ctx.tensors(self);
  if (single && world != 1) {
    fail("strategy=single trains on one worker, not " + std::to_string(world)
         + ": submit it with --workers 1, or use strategy=allreduce");
    return {};
  }
  if (batch < world) {
    fail("batch=" + std::to_string(batch) + " gives " + std::to_string(world)
         + " workers less than a sample each");
    return {};
  }
  auto hidden = parse_hidden(ctx.param("hidden"));
  if (!hidden) {
    fail(hidden.error());
    return {};
  }
  auto data = shared_data(ctx.param("data_dir"));
  if (!data) {
    fail(data.error());
    return {};
  }
  st->data = *data;
  // The device: the worker's GPU when it got one (and device=auto or cuda), else the CPU.
  auto want = ctx.param("device");
  std::string why_cpu = "device=cpu";
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (want != "cpu") {
    if (visible && *visible)
      st->dev = monkey::devices::make_cuda_compute(0, &why_cpu);
    else
      why_cpu = "the worker was given no GPU (submit with --gpus 1 for one)";
    if (!st->dev && want == "cuda") {
      fail("device=cuda, but " + why_cpu);
      return {};
    }
  }
  if (!st->dev)
    st->dev = monkey::devices::make_cpu_compute(blas_threads());
  // Shares of the global batch: equal (the first batch % world ranks one more).
  st->share = batch / world + (rank < batch % world ? 1 : 0);
  st->offset = rank * (batch / world) + std::min<int>(rank, batch % world);
  std::vector<int> sizes = {image_pixels};
  sizes.insert(sizes.end(), hidden->begin(), hidden->end());
  sizes.push_back(classes);
  st->stats = 3 + static_cast<size_t>(world);
  st->exchange = tensor::f32(st->stats + param_count(sizes));
  st->model = std::make_unique<mlp>(*st->dev, sizes, std::max(st->share, 1000),
                                    st->exchange.f32() + st->stats);
  st->model->init(seed);
  st->steps_per_epoch = st->data->train.count / batch;
  ctx.log("rank " + std::to_string(rank) + " of " + std::to_string(world) + ": " + strategy
          + ", MLP " + ctx.param("hidden") + " (" + std::to_string(st->model->params())
          + " parameters) on " + st->dev->name()
          + (st->dev->gpu() ? "" : " (" + why_cpu + ")") + ", " + std::to_string(st->share)
          + " of each batch of " + std::to_string(batch)
          + (slow > 1 ? ", throttled " + std::to_string(slow) + "x" : ""));
  if (auto c = ctx.latest_checkpoint(0)) {
    try {
      auto oh = msgpack::unpack(c->data.data(), c->data.size());
      auto saved = oh.get().as<saved_model>();
      if (auto ok = st->model->restore(saved.state); !ok) {
        fail(ok.error());
        return {};
      }
      st->step = saved.step;
      ctx.log("resumed at step " + std::to_string(st->step) + " (epoch "
              + std::to_string(st->step / st->steps_per_epoch) + ")");
      if (rank == 0)
        ctx.report(st->step, {{"resumed_at", static_cast<double>(st->step)}});
    } catch (const std::exception& e) {
      fail(std::string("the checkpoint does not decode: ") + e.what());
      return {};
    }
  }
  ctx.report(st->step, {{"share", static_cast<double>(st->share)}}); // the rows it computes

  auto save = [=] {
    saved_model m;
    m.step = st->step;
    if (rank == 0)
      m.state = st->model->save();
    msgpack::sbuffer buf;
    msgpack::pack(buf, m);
    ctx.save_checkpoint(st->step, std::string(buf.data(), buf.size()));
  };

  // The step's end, once the gradients are summed (or at once for `single`).
  auto finish_step = [=] {
    float* s = st->exchange.f32();
    auto now = clock_type::now();
    double exchange_s = std::chrono::duration<double>(now - st->compute_end).count();
    double slowest = 0;
    for (int32_t r = 0; r < world; ++r)
      slowest = std::max(slowest, static_cast<double>(s[3 + r]));
    double wait_s = std::min(exchange_s, std::max(0.0, slowest - st->compute_s));
    double loss = static_cast<double>(s[0]) / batch;
    bool stop = s[2] > 0;
    if (st->dev->gpu() && !single) // the summed gradients back to the device
      st->dev->upload(st->model->gradients(), s + st->stats, st->model->params() * sizeof(float));
    st->model->sgd(lr, momentum, wd);
    st->dev->synchronize();
    double step_s = seconds_since(st->step_start);
    std::map<std::string, double> m = {
      {"compute_s", st->compute_s}, {"wait_s", wait_s}, {"comm_s", exchange_s - wait_s}};
    if (rank == 0) {
      m["loss"] = loss;
      m["samples_per_s"] = batch / step_s;
    }
    ctx.report(st->step, m);
    st->epoch_loss += loss;
    st->epoch_steps += 1;
    st->step += 1;
    if (stop) {
      ctx.log("stopping: the target accuracy was reached");
      save();
      self->quit();
      return;
    }
    bool epoch_end = st->step % st->steps_per_epoch == 0;
    if (epoch_end && rank == 0) {
      auto score = st->model->evaluate(st->data->test);
      int64_t epoch = st->step / st->steps_per_epoch;
      ctx.report(st->step, {{"test_accuracy", score.accuracy},
                            {"test_loss", score.loss},
                            {"train_loss", st->epoch_loss / std::max<int64_t>(1, st->epoch_steps)},
                            {"epoch", static_cast<double>(epoch)}});
      ctx.log("epoch " + std::to_string(epoch) + ": test accuracy "
              + std::to_string(score.accuracy) + ", train loss "
              + std::to_string(st->epoch_loss / std::max<int64_t>(1, st->epoch_steps)));
      if (target > 0 && score.accuracy >= target && !st->stop_next) {
        ctx.report(st->step, {{"time_to_target_s", seconds_since(st->run_start)}});
        st->stop_next = true;
        if (world == 1) {
          save();
          self->quit();
          return;
        }
      }
    }
    if (epoch_end) {
      st->epoch_loss = 0;
      st->epoch_steps = 0;
    }
    if (epoch_end || (every > 0 && st->step % every == 0))
      save();
    self->send(self, next_step::value);
  };

  // The end of this rank's forward and backward pass: its compute time (the throttle
  // stretching it), then the statistics of the step into the exchange.
  auto end_compute = [=] {
    st->dev->synchronize();
    st->compute_s = seconds_since(st->step_start);
    if (slow > 1) {
      std::this_thread::sleep_for(std::chrono::duration<double>(st->compute_s * (slow - 1)));
      st->compute_s *= slow;
    }
    float* s = st->exchange.f32();
    s[0] = static_cast<float>(st->model->pass_result().loss_sum);
    s[1] = static_cast<float>(st->model->pass_result().correct);
    s[3 + rank] = static_cast<float>(st->compute_s);
    if (rank == 0 && st->stop_next)
      s[2] = 1;
  };

  st->run_start = clock_type::now();
  self->send(self, next_step::value);
  return {
    [=](next_step) {
      if (st->step >= epochs * st->steps_per_epoch) {
        ctx.log("done after " + std::to_string(epochs) + " epochs");
        self->quit();
        return;
      }
      int64_t epoch = st->step / st->steps_per_epoch;
      if (st->order_epoch != epoch) {
        st->order = epoch_order(st->data->train.count, seed, epoch);
        st->order_epoch = epoch;
      }
      st->step_start = clock_type::now();
      auto at = static_cast<size_t>((st->step % st->steps_per_epoch) * batch + st->offset);
      st->model->load_batch(st->data->train, st->order.data() + at, st->share);
      float* s = st->exchange.f32();
      std::fill(s, s + st->stats, 0.0f);
      auto& m = *st->model;
      st->pending.clear();
      m.train_pass(1.0f / static_cast<float>(batch), [&](int l) {
        if (single)
          return;
        auto r = m.layer_range(l);
        float* grads = st->exchange.f32() + st->stats;
        if (st->dev->gpu()) // the data plane moves host memory
          st->dev->download(grads + r.first, m.gradients() + r.first, r.count * sizeof(float));
        auto first = st->stats + r.first, count = r.count;
        if (l == 1) {
          // The last layer to finish: the step's statistics ride along with it.
          end_compute();
          first = 0;
          count += st->stats;
        }
        st->pending[dp.allreduce(st->exchange.slice(first, count), monkey::app::reduce::sum)] = l;
      });
      if (single) { // no exchange: the step ends here
        end_compute();
        st->compute_end = clock_type::now();
        finish_step();
        return;
      }
      st->compute_end = clock_type::now();
    },
    [=](const monkey::app::tensor_done& d) {
      auto it = st->pending.find(d.op);
      if (it == st->pending.end())
        return;
      if (!d.ok()) {
        // The gang policy starts the gang again from its newest checkpoint.
        self->quit(caf::make_error(caf::sec::runtime_error, "gradient all-reduce: " + d.error));
        return;
      }
      st->pending.erase(it);
      if (st->pending.empty())
        finish_step();
    },
  };
}

monkey::app::definition define() {
  monkey::app::definition app{"fmnist", "data-parallel training of an MLP on Fashion-MNIST "
                                        "across the cluster's devices"};
  app.choice_param("strategy", "allreduce", {"single", "allreduce"},
                   "single: one worker; allreduce: ring all-reduce of the gradients");
  app.string_param("hidden", "512,256", "hidden layer widths")
    .pattern("[0-9]{1,5}(,[0-9]{1,5}){0,7}", "layer widths separated by commas (e.g. 512,256)");
  app.float_param("lr", 0.05, 1e-6, 10, "learning rate");
  app.float_param("momentum", 0.9, 0, 0.999, "SGD momentum");
  app.float_param("weight_decay", 0, 0, 1, "L2 weight decay");
  app.int_param("batch", 256, 1, 60000, "global batch (split among the workers)");
  app.int_param("epochs", 5, 1, 1000, "passes over the training set");
  app.float_param("target_accuracy", 0, 0, 1,
                  "stop once the test accuracy reaches this (0: never); time_to_target_s");
  app.string_param("throttle", "", "RANK:FACTOR slows that worker's compute FACTOR times")
    .pattern("([0-9]+:[0-9]+(\\.[0-9]+)?)?", "RANK:FACTOR (e.g. 1:2)");
  app.int_param("seed", -1, -1, 1ll << 40, "initial weights and batch order (-1: the job's seed)");
  app.int_param("checkpoint_every", 0, 0, 1000000,
                "checkpoint every this many steps too (0: at epoch ends only)");
  app.choice_param("device", "auto", {"auto", "cpu", "cuda"},
                   "auto: the worker's GPU when it got one (--gpus 1), else the CPU");
  app.string_param("data_dir", default_data_dir, "the Fashion-MNIST IDX files");
  app.data_plane();
  app.own_threads();
  app.entry("fmnist_rank", fmnist_rank);
  return app;
}

} // namespace

MONKEY_APP(define)
