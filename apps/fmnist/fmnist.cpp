// SPDX-License-Identifier: Apache-2.0
// fmnist: data-parallel training of an MLP on Fashion-MNIST across the cluster's devices
// (issue #12; docs/fmnist.md). Every worker holds the whole model; each step's global batch
// (`batch`) is split among the workers (equally, or by their measured speed: split.hpp),
// each computes the gradient of its rows on its device (devices/compute.hpp: OpenBLAS on the
// CPU, cuBLAS where the worker got a GPU), and:
//
// - `single`: one worker applies its own gradient;
// - `allreduce`: the workers sum their gradients with the data plane's ring all-reduce, one
//   layer at a time from the last, each layer's all-reduce starting as soon as the backward
//   pass has finished it (overlapped with the layers before it), then every worker applies
//   the same update;
// - `ps-sync` / `ps-async`: each shard of the parameters lives on a parameter server
//   (ps.hpp); a worker pushes a shard's gradients as soon as the backward pass has finished
//   it and waits for every shard's new parameters; the servers sum all workers' pushes
//   before one update (sync) or apply each push at once, a worker waiting only when it is
//   more than `staleness` steps ahead of the slowest (async).
//
// Per step rank 0 reports `loss` and `samples_per_s`; every worker reports where its time
// went: `compute_s` (its forward and backward), `wait_s` (waiting for the slowest worker, or
// for the staleness bound) and `comm_s` (moving the gradients and parameters, the rest of
// the exchange). Per epoch rank 0 evaluates the test set: `test_accuracy` and `train_loss`.
// Checkpoints at every epoch's end (and every `checkpoint_every` steps); a new attempt
// resumes at the step reached.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include <monkey/app.hpp>

#include "apps/fmnist/data.hpp"
#include "apps/fmnist/model.hpp"
#include "apps/fmnist/ps.hpp"
#include "apps/fmnist/split.hpp"

namespace {

using monkey::app::tensor;
using namespace monkey::fmnist;
using clock_type = std::chrono::steady_clock;
using next_step = caf::atom_constant<caf::atom("next_step")>;

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

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


/// The run as the job's parameters set it.
struct run_config {
  std::string strategy;
  bool single = false, ps = false, async = false, dedicated = false, by_speed = false;
  int32_t workers = 1; ///< ranks 0..workers-1 train; dedicated servers follow them
  int32_t servers = 0;
  int batch = 0;
  int64_t epochs = 0, every = 0, staleness = 0;
  float lr = 0, momentum = 0, wd = 0;
  double target = 0;
  uint64_t seed = 0;
  std::vector<int> sizes; ///< the model's layers
  share_schedule replay;  ///< `shares=`: recorded shares replayed (no split by speed then)
};

monkey::expected<run_config> read_config(const monkey::app::context& ctx) {
  run_config c;
  c.strategy = ctx.param("strategy");
  c.single = c.strategy == "single";
  c.ps = c.strategy == "ps-sync" || c.strategy == "ps-async";
  c.async = c.strategy == "ps-async";
  c.dedicated = c.ps && ctx.param("ps_placement") == "dedicated";
  c.by_speed = ctx.param("split") == "speed";
  c.servers = c.ps ? static_cast<int32_t>(ctx.param_int("servers")) : 0;
  c.workers = ctx.world_size() - (c.dedicated ? c.servers : 0);
  c.batch = static_cast<int>(ctx.param_int("batch"));
  c.epochs = ctx.param_int("epochs");
  c.every = ctx.param_int("checkpoint_every");
  c.staleness = ctx.param_int("staleness");
  c.lr = static_cast<float>(ctx.param_float("lr"));
  c.momentum = static_cast<float>(ctx.param_float("momentum"));
  c.wd = static_cast<float>(ctx.param_float("weight_decay"));
  c.target = ctx.param_float("target_accuracy");
  c.seed = ctx.param_int("seed") >= 0 ? static_cast<uint64_t>(ctx.param_int("seed")) : ctx.seed();
  if (c.workers < 1)
    return monkey::failure{"the job has " + std::to_string(ctx.world_size())
                           + " ranks, none left to train beside " + std::to_string(c.servers)
                           + " dedicated servers"};
  if (c.single && c.workers != 1)
    return monkey::failure{"strategy=single trains on one worker, not "
                           + std::to_string(c.workers)
                           + ": submit it with --workers 1, or use strategy=allreduce"};
  if (c.batch < c.workers)
    return monkey::failure{"batch=" + std::to_string(c.batch) + " gives "
                           + std::to_string(c.workers) + " workers less than a sample each"};
  auto hidden = parse_hidden(ctx.param("hidden"));
  if (!hidden)
    return monkey::failure{hidden.error()};
  c.sizes = {image_pixels};
  c.sizes.insert(c.sizes.end(), hidden->begin(), hidden->end());
  c.sizes.push_back(classes);
  if (auto [replay, err] = share_schedule::parse(ctx.param("shares"), c.batch, c.workers);
      !err.empty()) {
    return monkey::failure{err};
  } else if (!replay.empty()) {
    c.replay = std::move(replay);
    c.by_speed = false;
  }
  if (c.ps && static_cast<uint64_t>(c.servers) > param_count(c.sizes))
    return monkey::failure{"servers=" + std::to_string(c.servers) + " is more than the model's "
                           + std::to_string(param_count(c.sizes)) + " parameters"};
  return c;
}

ps_settings server_settings(const run_config& c) {
  ps_settings s;
  s.layout.workers = c.workers;
  s.layout.servers = c.servers;
  s.layout.dedicated = c.dedicated;
  s.layout.async = c.async;
  s.layout.staleness = c.staleness;
  s.layout.params = param_count(c.sizes);
  s.sizes = c.sizes;
  s.seed = c.seed;
  s.lr = c.lr;
  s.momentum = c.momentum;
  s.weight_decay = c.wd;
  s.batch = c.batch;
  s.split_by_speed = c.async && c.by_speed && c.replay.empty();
  return s;
}

/// A checkpoint a worker that runs servers saves once it reached the step and every one of
/// its servers sent its shard of that step.
struct pending_checkpoint {
  bool reached = false;
  std::vector<int> shares; ///< the shares of its step (ps-async may be past it when it is saved)
  std::map<int32_t, std::string> shards;
};

struct rank_state {
  std::shared_ptr<const data_pair> data;
  std::unique_ptr<monkey::devices::compute> dev;
  std::unique_ptr<mlp> model;
  tensor exchange;       ///< [stats | gradients]: what the all-reduce sums (ps: pushes)
  size_t stats = 0;      ///< floats ahead of the gradients: loss, correct, stop, one per rank
  tensor weights;        ///< ps: the parameters, where the servers' replies land
  tensor push_hdr;       ///< ps: this step's push header (float64), as the step fills it
  std::vector<tensor> push_hdrs; ///< ps: per server, the header as pushed (a copy: the step
                                 ///< goes on filling push_hdr while earlier pushes are sent)
  std::vector<tensor> reply_hdr; ///< ps: per server, its reply's header (float64)
  std::vector<char> pushed;      ///< ps: per server, this step's push is out
  uint64_t lowest_done = 0;      ///< ps: the backward pass has finished params from here on
  std::vector<uint32_t> order;
  int64_t order_epoch = -1;
  int64_t step = 0;      ///< global step
  int64_t steps_per_epoch = 0;
  std::vector<int> shares; ///< every worker's rows of each global batch
  std::unique_ptr<speed_split> split;
  int64_t shares_from = -1; ///< ps-async: the step the servers' latest shares applied from
  std::map<uint64_t, int> pending; ///< data plane op → layer (allreduce) or server (ps)
  bool ready = false;    ///< the start's exchanges are done: training runs
  tensor speeds;         ///< split=speed: every worker's device GFLOP/s, summed at the start
  clock_type::time_point step_start, compute_end, run_start;
  double compute_s = 0;
  double epoch_loss = 0;
  int64_t epoch_steps = 0;
  bool stop_next = false; ///< rank 0: the target was reached, tell the others in the next step
  double last_samples = 0; ///< ps-async rank 0: server 0's sample count at the last reply
  clock_type::time_point last_samples_at;
  // A worker that runs (colocated) servers: their actor, checkpoints waiting for shards.
  std::vector<int32_t> hosted;
  caf::actor servers;
  bool servers_down = true, training_done = false;
  std::map<int64_t, pending_checkpoint> checkpoints;
};

caf::behavior fmnist_server(caf::event_based_actor* self, monkey::app::context ctx) {
  auto c = read_config(ctx);
  if (!c) {
    self->quit(caf::make_error(caf::sec::runtime_error, c.error()));
    return {};
  }
  return ps_server(self, ctx, server_settings(*c));
}

caf::behavior fmnist_rank(caf::event_based_actor* self, monkey::app::context ctx) {
  auto fail = [self, ctx](const std::string& why) {
    ctx.log("error: " + why);
    self->quit(caf::make_error(caf::sec::runtime_error, why));
  };
  auto got = read_config(ctx);
  if (!got) {
    fail(got.error());
    return {};
  }
  const auto cfg = *got;
  const auto rank = ctx.rank();
  if (cfg.dedicated && rank >= cfg.workers) // a rank of its own for parameter servers
    return ps_server(self, ctx, server_settings(cfg));
  auto st = std::make_shared<rank_state>();
  const auto W = cfg.workers;
  const auto batch = cfg.batch;
  const auto slow = throttle_for(ctx.param("throttle"), rank);
  const auto layout = server_settings(cfg).layout;
  auto dp = ctx.tensors(self);
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
  // Shares of the global batch: equal, or by speed (starting from every worker's measured
  // GEMM speed, which the first all-reduce would be too late for: the node's figure is the
  // same for workers of one node, and steps correct it).
  st->shares = equal_shares(batch, W);
  const auto params = param_count(cfg.sizes);
  st->stats = 3 + static_cast<size_t>(W);
  // (from the shared arena: the all-reduce of workers on one machine goes in place)
  st->exchange = dp.alloc(monkey::app::dtype::f32, st->stats + params);
  if (cfg.ps) {
    st->weights = tensor::f32(params);
    st->push_hdr = tensor(monkey::app::dtype::f64, push_fields);
    for (int32_t s = 0; s < cfg.servers; ++s)
      st->push_hdrs.emplace_back(monkey::app::dtype::f64, push_fields);
    for (int32_t s = 0; s < cfg.servers; ++s)
      st->reply_hdr.emplace_back(monkey::app::dtype::f64, reply_length(W));
    st->pushed.assign(static_cast<size_t>(cfg.servers), 0);
  }
  int max_rows = std::max(cfg.by_speed || !cfg.replay.empty()
                            ? batch
                            : st->shares[static_cast<size_t>(rank)],
                          1000);
  st->model = std::make_unique<mlp>(*st->dev, cfg.sizes, max_rows, st->exchange.f32() + st->stats,
                                    cfg.ps ? st->weights.f32() : nullptr);
  st->model->init(cfg.seed);
  st->steps_per_epoch = st->data->train.count / batch;
  if (cfg.by_speed)
    st->split = std::make_unique<speed_split>(batch, std::vector<double>(static_cast<size_t>(W), 0.0));
  // A checkpoint: the step and the shares from this rank's own, the weights (single and
  // allreduce) from rank 0's; a parameter server's shards are its servers'.
  std::vector<int32_t> sources = {rank};
  if (rank != 0 && !cfg.ps)
    sources.push_back(0);
  for (int32_t from : sources) {
    auto c = ctx.latest_checkpoint(from);
    if (!c)
      continue;
    try {
      auto oh = msgpack::unpack(c->data.data(), c->data.size());
      auto saved = oh.get().as<saved_model>();
      if (from == 0 && !cfg.ps)
        if (auto ok = st->model->restore(saved.state); !ok) {
          fail(ok.error());
          return {};
        }
      if (from == rank) {
        st->step = saved.step;
        if (st->split)
          st->split->resume(saved.shares);
      }
    } catch (const std::exception& e) {
      fail(std::string("the checkpoint does not decode: ") + e.what());
      return {};
    }
  }
  if (st->split)
    st->shares = st->split->shares();
  if (!cfg.replay.empty())
    st->shares = cfg.replay.at(st->step);
  if (st->step > 0) {
    ctx.log("resumed at step " + std::to_string(st->step) + " (epoch "
            + std::to_string(st->step / st->steps_per_epoch) + ")");
    if (rank == 0)
      ctx.report(st->step, {{"resumed_at", static_cast<double>(st->step)}});
  }
  if (cfg.ps && !cfg.dedicated)
    st->hosted = layout.hosted_by(rank);
  ctx.log("rank " + std::to_string(rank) + " of " + std::to_string(W) + " workers: "
          + cfg.strategy
          + (cfg.ps ? " (" + std::to_string(cfg.servers) + " servers, "
                        + ctx.param("ps_placement")
                        + (cfg.async ? ", staleness " + std::to_string(cfg.staleness) : "") + ")"
                    : "")
          + ", MLP " + ctx.param("hidden") + " (" + std::to_string(st->model->params())
          + " parameters) on " + st->dev->name()
          + (st->dev->gpu() ? "" : " (" + why_cpu + ")")
          + (cfg.replay.empty() ? ", split=" + ctx.param("split")
                                : ", recorded shares replayed ("
                                    + std::to_string(cfg.replay.changes()) + " entries)")
          + " (" + shares_text(st->shares) + " of each batch of " + std::to_string(batch) + ")"
          + (ctx.device_gflops() > 0
               ? ", device " + std::to_string(static_cast<int>(ctx.device_gflops())) + " GFLOP/s"
               : "")
          + (slow > 1 ? ", throttled " + number_text(slow) + "x" : ""));
  ctx.report(st->step, {{"share", static_cast<double>(st->shares[static_cast<size_t>(rank)])}});

  auto write_checkpoint = [=](int64_t step, std::map<int32_t, std::string> shards,
                              std::vector<int> shares) {
    saved_model m;
    m.step = step;
    m.shares = std::move(shares);
    if (rank == 0 && !cfg.ps)
      m.state = st->model->save();
    m.shards = std::move(shards);
    msgpack::sbuffer buf;
    msgpack::pack(buf, m);
    ctx.save_checkpoint(step, std::string(buf.data(), buf.size()));
  };
  // Saves the checkpoints of steps reached whose shards all came; a worker without servers
  // saves at once.
  auto flush_checkpoints = [=] {
    for (auto it = st->checkpoints.begin(); it != st->checkpoints.end();) {
      if (it->second.reached && it->second.shards.size() == st->hosted.size()) {
        write_checkpoint(it->first, std::move(it->second.shards), std::move(it->second.shares));
        it = st->checkpoints.erase(it);
      } else {
        ++it;
      }
    }
  };
  auto save = [=] {
    auto& c = st->checkpoints[st->step];
    c.reached = true;
    c.shares = st->shares;
    flush_checkpoints();
  };
  // The end of training: a worker that runs servers waits for them (the other workers may
  // still push) and for their last shards.
  // Ends the rank once training is over, the last frames are out and the servers it runs
  // have ended.
  auto maybe_finish = [=] {
    if (!st->training_done || !st->servers_down || !st->pending.empty())
      return;
    flush_checkpoints();
    self->quit();
  };
  auto end_training = [=] {
    st->training_done = true;
    st->pending.clear();
    if (cfg.async) { // tell every server this worker ended (they wait for every worker)
      f64(st->push_hdr)[p_flags] = flag_done;
      for (int32_t s = 0; s < cfg.servers; ++s) {
        auto r = layout.shard(s);
        auto& h = st->push_hdrs[static_cast<size_t>(s)];
        std::memcpy(h.data(), st->push_hdr.data(), push_fields * sizeof(double));
        st->pending[dp.send(layout.host_of(s), ps_tag_for(push_header, s), h)] = -3;
        st->pending[dp.send(layout.host_of(s), ps_tag_for(push_grads, s),
                            st->exchange.slice(st->stats + r.first, r.count))] = -3;
      }
    }
    maybe_finish();
  };
  auto is_checkpoint_step = [=](int64_t step) {
    return step % st->steps_per_epoch == 0 || (cfg.every > 0 && step % cfg.every == 0);
  };

  // The step's end, once the exchange is done (or at once for `single`).
  auto finish_step = [=] {
    float* s = st->exchange.f32();
    auto now = clock_type::now();
    double exchange_s = std::chrono::duration<double>(now - st->compute_end).count();
    std::vector<double> computes(static_cast<size_t>(W), st->compute_s);
    double loss = 0, held = 0;
    bool stop = false;
    if (cfg.ps) {
      double* h0 = f64(st->reply_hdr[0]);
      for (int32_t w = 0; w < W; ++w)
        computes[static_cast<size_t>(w)] = h0[reply_fields + w];
      for (auto& h : st->reply_hdr) {
        stop = stop || (static_cast<int>(f64(h)[r_flags]) & flag_stop);
        held = std::max(held, f64(h)[r_held]);
      }
      loss = cfg.async ? f64(st->push_hdr)[p_loss] / std::max(1, st->shares[static_cast<size_t>(rank)])
                       : h0[r_loss] / batch;
      if (st->dev->gpu())
        st->dev->upload(st->model->weights(), st->weights.f32(), params * sizeof(float));
    } else {
      for (int32_t r = 0; r < W; ++r)
        computes[static_cast<size_t>(r)] = s[3 + r];
      loss = static_cast<double>(s[0]) / batch;
      stop = s[2] > 0;
      if (st->dev->gpu() && !cfg.single) // the summed gradients back to the device
        st->dev->upload(st->model->gradients(), s + st->stats, params * sizeof(float));
      st->model->sgd(cfg.lr, cfg.momentum, cfg.wd);
    }
    st->dev->synchronize();
    double slowest = *std::max_element(computes.begin(), computes.end());
    double wait_s = cfg.async ? std::min(exchange_s, held)
                              : std::min(exchange_s, std::max(0.0, slowest - st->compute_s));
    double step_s = std::chrono::duration<double>(clock_type::now() - st->step_start).count();
    std::map<std::string, double> m = {
      {"compute_s", st->compute_s}, {"wait_s", wait_s}, {"comm_s", exchange_s - wait_s}};
    if (rank == 0) {
      m["loss"] = loss;
      if (cfg.async) { // every worker's rows the servers took since the last step
        double samples = f64(st->reply_hdr[0])[r_samples];
        double dt = std::chrono::duration<double>(now - st->last_samples_at).count();
        if (st->last_samples > 0 && dt > 0)
          m["samples_per_s"] = (samples - st->last_samples) / dt;
        st->last_samples = samples;
        st->last_samples_at = now;
      } else {
        m["samples_per_s"] = batch / step_s;
      }
    }
    ctx.report(st->step, m);
    st->epoch_loss += loss;
    st->epoch_steps += 1;
    st->step += 1;
    if (!cfg.replay.empty()) {
      if (auto next = cfg.replay.at(st->step); next != st->shares) {
        st->shares = std::move(next);
        ctx.report(st->step, {{"share", static_cast<double>(st->shares[static_cast<size_t>(rank)])}});
        if (rank == 0)
          ctx.log("step " + std::to_string(st->step) + ": shares " + shares_text(st->shares)
                  + " as recorded");
      }
    } else if (st->split && cfg.async) {
      // The server of shard 0 decides; its replies carry the shares and their first step.
      auto from = static_cast<int64_t>(f64(st->reply_hdr[0])[r_shares_from]);
      if (from > st->shares_from && from <= st->step) {
        if (from < st->step)
          return fail("the servers' new shares apply from step " + std::to_string(from)
                      + ", which this worker passed (it is at step " + std::to_string(st->step)
                      + ")");
        st->shares_from = from;
        const double* next = f64(st->reply_hdr[0]) + reply_fields + W;
        for (int32_t w = 0; w < W; ++w)
          st->shares[static_cast<size_t>(w)] = static_cast<int>(next[w]);
        st->split->resume(st->shares);
        ctx.report(st->step, {{"share", static_cast<double>(st->shares[static_cast<size_t>(rank)])}});
        if (rank == 0)
          ctx.log("step " + std::to_string(st->step) + ": shares " + shares_text(st->shares)
                  + " by the workers' measured speed");
      }
    } else if (st->split && st->split->observe(computes)) {
      st->shares = st->split->shares();
      ctx.report(st->step, {{"share", static_cast<double>(st->shares[static_cast<size_t>(rank)])}});
      if (rank == 0)
        ctx.log("step " + std::to_string(st->step) + ": shares " + shares_text(st->shares)
                + " by the workers' measured speed");
    }
    if (stop) {
      ctx.log("stopping: the target accuracy was reached");
      if (!cfg.async)
        save();
      end_training();
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
      if (cfg.target > 0 && score.accuracy >= cfg.target && !st->stop_next) {
        ctx.report(st->step, {{"time_to_target_s", seconds_since(st->run_start)}});
        st->stop_next = true;
        if (W == 1 && !cfg.ps) {
          save();
          end_training();
          return;
        }
      }
    }
    if (epoch_end) {
      st->epoch_loss = 0;
      st->epoch_steps = 0;
    }
    if (is_checkpoint_step(st->step))
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
    if (cfg.ps) {
      double* h = f64(st->push_hdr);
      h[p_loss] = st->model->pass_result().loss_sum;
      h[p_correct] = st->model->pass_result().correct;
      h[p_compute] = st->compute_s;
    }
  };
  // ps: pushes shard s's gradients (and the step's header) to its server.
  auto push = [=](int32_t s) {
    auto r = layout.shard(s);
    auto host = layout.host_of(s);
    st->pushed[static_cast<size_t>(s)] = 1;
    auto& h = st->push_hdrs[static_cast<size_t>(s)];
    std::memcpy(h.data(), st->push_hdr.data(), push_fields * sizeof(double));
    st->pending[dp.send(host, ps_tag_for(push_header, s), h)] = -1;
    st->pending[dp.send(host, ps_tag_for(push_grads, s),
                        st->exchange.slice(st->stats + r.first, r.count))] = -1;
  };
  // ps: waits for every server's parameters (the reply to this step's push, or the first).
  auto expect_replies = [=] {
    for (int32_t s = 0; s < cfg.servers; ++s) {
      auto r = layout.shard(s);
      auto host = layout.host_of(s);
      st->pending[dp.recv(host, ps_tag_for(reply_header, s), st->reply_hdr[static_cast<size_t>(s)])] = s;
      st->pending[dp.recv(host, ps_tag_for(reply_params, s), st->weights.slice(r.first, r.count))] = s;
    }
  };

  st->run_start = clock_type::now();
  self->set_down_handler([=](caf::down_msg& dm) {
    if (dm.source != st->servers.address())
      return;
    st->servers_down = true;
    if (dm.reason && dm.reason != caf::exit_reason::normal) {
      self->quit(dm.reason);
      return;
    }
    maybe_finish();
  });
  if (!st->hosted.empty()) { // this worker runs servers beside it (colocated)
    st->servers = ctx.spawn("fmnist_server");
    st->servers_down = false;
    self->link_to(st->servers);
    self->monitor(st->servers);
  }
  // The start: split=speed from a fresh start learns every worker's device speed (an
  // all-reduce among the workers, each filling its own slot); ps waits for the servers'
  // parameters. Training starts when both are in.
  if (st->split && st->step == 0 && W > 1) {
    st->speeds = tensor::f32(static_cast<size_t>(W));
    st->speeds.f32()[rank] = static_cast<float>(ctx.device_gflops());
    std::vector<int32_t> group;
    for (int32_t w = 0; w < W; ++w)
      group.push_back(w);
    st->pending[dp.allreduce(st->speeds, monkey::app::reduce::sum, group)] = -2;
  }
  if (cfg.ps)
    expect_replies(); // the servers' parameters first
  if (st->pending.empty()) {
    st->ready = true;
    self->send(self, next_step::value);
  }
  return {
    [=](next_step) {
      if (st->step >= cfg.epochs * st->steps_per_epoch) {
        ctx.log("done after " + std::to_string(cfg.epochs) + " epochs");
        end_training();
        return;
      }
      int64_t epoch = st->step / st->steps_per_epoch;
      if (st->order_epoch != epoch) {
        st->order = epoch_order(st->data->train.count, cfg.seed, epoch);
        st->order_epoch = epoch;
      }
      st->step_start = clock_type::now();
      auto share = st->shares[static_cast<size_t>(rank)];
      auto offset = offsets_of(st->shares)[static_cast<size_t>(rank)];
      auto at = static_cast<size_t>((st->step % st->steps_per_epoch) * batch + offset);
      st->model->load_batch(st->data->train, st->order.data() + at, share);
      float* s = st->exchange.f32();
      std::fill(s, s + st->stats, 0.0f);
      auto& m = *st->model;
      st->pending.clear();
      if (cfg.ps) {
        double* h = f64(st->push_hdr);
        std::fill(h, h + push_fields, 0.0);
        h[p_step] = static_cast<double>(st->step);
        h[p_rows] = share;
        int flags = 0;
        if (rank == 0 && st->stop_next)
          flags |= flag_stop;
        if (st->step + 1 >= cfg.epochs * st->steps_per_epoch)
          flags |= flag_last;
        if (is_checkpoint_step(st->step + 1))
          flags |= flag_ckpt;
        h[p_flags] = flags;
        std::fill(st->pushed.begin(), st->pushed.end(), 0);
        expect_replies();
      }
      m.train_pass(1.0f / static_cast<float>(batch), [&](int l) {
        if (cfg.single)
          return;
        auto r = m.layer_range(l);
        float* grads = st->exchange.f32() + st->stats;
        if (st->dev->gpu()) // the data plane moves host memory
          st->dev->download(grads + r.first, m.gradients() + r.first, r.count * sizeof(float));
        if (l == 1) // the last layer to finish: the step's statistics are known
          end_compute();
        if (cfg.ps) {
          // Every shard whose parameters the backward pass has finished goes to its server.
          for (int32_t sh = cfg.servers - 1; sh >= 0; --sh)
            if (!st->pushed[static_cast<size_t>(sh)] && layout.shard(sh).first >= r.first)
              push(sh);
          return;
        }
        auto first = st->stats + r.first, count = r.count;
        if (l == 1) { // the statistics ride along with the first layer
          first = 0;
          count += st->stats;
        }
        st->pending[dp.allreduce(st->exchange.slice(first, count), monkey::app::reduce::sum)] = l;
      });
      if (cfg.single) { // no exchange: the step ends here
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
        self->quit(caf::make_error(caf::sec::runtime_error,
                                   std::string(cfg.ps ? "parameter server exchange: "
                                                      : "gradient all-reduce: ")
                                     + d.error));
        return;
      }
      st->pending.erase(it);
      if (st->training_done)
        return maybe_finish();
      if (!st->pending.empty())
        return;
      if (!st->ready) { // the start's exchanges are in: training starts
        st->ready = true;
        if (cfg.ps) {
          auto at = static_cast<int64_t>(f64(st->reply_hdr[0])[r_step]);
          if (at != st->step) {
            fail("the servers are at step " + std::to_string(at) + ", this worker at "
                 + std::to_string(st->step) + " (checkpoints of different steps)");
            return;
          }
          if (st->dev->gpu())
            st->dev->upload(st->model->weights(), st->weights.f32(), params * sizeof(float));
          st->last_samples_at = clock_type::now();
        }
        if (!st->speeds.empty()) {
          std::vector<double> gflops(st->speeds.f32(), st->speeds.f32() + W);
          st->split = std::make_unique<speed_split>(batch, gflops);
          st->shares = st->split->shares();
          if (st->shares != equal_shares(batch, W))
            ctx.report(st->step, {{"share", static_cast<double>(st->shares[static_cast<size_t>(rank)])}});
          if (rank == 0)
            ctx.log("shares " + shares_text(st->shares) + " from the devices' GEMM speed ("
                    + [&] {
                        std::string t;
                        for (double g : gflops)
                          t += (t.empty() ? "" : ", ") + number_text(g);
                        return t;
                      }()
                    + " GFLOP/s; 0: not measured)");
        }
        self->send(self, next_step::value);
        return;
      }
      finish_step();
    },
    [=](const monkey::app_message& msg) { // a colocated server's shard of a checkpoint
      if (auto snap = monkey::app::as<shard_snapshot>(msg)) {
        st->checkpoints[snap->step].shards[snap->shard] = std::move(snap->state);
        flush_checkpoints();
      }
    },
  };
}

monkey::app::definition define() {
  monkey::app::definition app{"fmnist", "data-parallel training of an MLP on Fashion-MNIST "
                                        "across the cluster's devices"};
  app.choice_param("strategy", "allreduce", {"single", "allreduce", "ps-sync", "ps-async"},
                   "single: one worker; allreduce: ring all-reduce of the gradients; ps-sync / "
                   "ps-async: sharded parameter servers, with a barrier or bounded staleness");
  app.string_param("hidden", "512,256", "hidden layer widths")
    .pattern("[0-9]{1,5}(,[0-9]{1,5}){0,7}", "layer widths separated by commas (e.g. 512,256)");
  app.float_param("lr", 0.05, 1e-6, 10, "learning rate");
  app.float_param("momentum", 0.9, 0, 0.999, "SGD momentum");
  app.float_param("weight_decay", 0, 0, 1, "L2 weight decay");
  app.int_param("batch", 256, 1, 60000, "global batch (split among the workers)");
  app.int_param("epochs", 5, 1, 1000, "passes over the training set");
  app.int_param("servers", 1, 1, 256, "parameter servers (shards of the parameters)")
    .only_with("strategy", {"ps-sync", "ps-async"})
    .adds_ranks("ps_placement", {"dedicated"});
  app.choice_param("ps_placement", "colocated", {"colocated", "dedicated"},
                   "colocated: worker s % workers runs server s beside it; dedicated: each "
                   "server is a rank of its own (the job gets `servers` more ranks)")
    .only_with("strategy", {"ps-sync", "ps-async"});
  app.int_param("staleness", 4, 0, 100000,
                "ps-async: the most steps a worker may run ahead of the slowest")
    .only_with("strategy", {"ps-async"});
  app.choice_param("split", "speed", {"speed", "equal"},
                   "speed: each worker's rows of the global batch follow its measured compute "
                   "speed; equal: the same rows for every worker");
  app.string_param("shares", "",
                   "replay recorded shares: STEP:ROWS/ROWS/...;STEP:... (what `monkey "
                   "reproduce` passes from a run's share points; none: split as `split` says)")
    .pattern("[0-9:/;]*", "STEP:ROWS/ROWS/... entries separated by ';' (e.g. 0:171/85;20:150/106)");
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
  app.actor("fmnist_server", fmnist_server);
  return app;
}

} // namespace

MONKEY_APP(define)
