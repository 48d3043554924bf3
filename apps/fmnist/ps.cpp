// SPDX-License-Identifier: Apache-2.0
// fmnist's parameter servers (ps.hpp; docs/fmnist.md, "Parameter servers").
#include "apps/fmnist/ps.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <set>

#include "apps/fmnist/model.hpp"
#include "devices/compute.hpp"

namespace monkey::fmnist {

using monkey::app::tensor;
using clock_type = std::chrono::steady_clock;

namespace {

/// One shard's state on its server.
struct shard_state {
  int32_t s = 0;
  ps_layout::range at;
  tensor params;
  std::vector<float> velocity;
  std::vector<tensor> grads, push_hdr, reply_hdr, reply_copy; ///< per worker
  std::vector<int> have;          ///< frames of the worker's current push that arrived
  std::vector<int64_t> pushes;    ///< steps pushed (applied) per worker
  std::vector<char> done, held;   ///< ps-async: the worker ended; its reply waits
  std::vector<clock_type::time_point> held_since;
  std::vector<double> compute;    ///< each worker's latest compute time
  int64_t step = 0;               ///< ps-sync: the step whose pushes are gathered
  double samples = 0;             ///< rows pushed so far (samples/s of ps-async)
  bool stop = false;
  bool ended = false;             ///< no more pushes come
  std::set<int64_t> snapshot_at;  ///< steps whose state is checkpointed
  int sends = 0;                  ///< replies in flight
};

struct server_state {
  std::vector<shard_state> shards;
  std::unique_ptr<devices::compute> dev;
  enum kind { recv_header, recv_grads, reply };
  struct op {
    size_t shard;
    kind what;
    int32_t worker;
  };
  std::map<uint64_t, op> pending;
  std::unique_ptr<async_split> split; ///< ps-async, split=speed, on shard 0's server
};

} // namespace

caf::behavior ps_server(caf::event_based_actor* self, monkey::app::context ctx, ps_settings cfg) {
  auto st = std::make_shared<server_state>();
  const auto L = cfg.layout;
  const auto W = L.workers;
  const auto rank = ctx.rank();
  auto dp = ctx.tensors(self);
  auto fail = [self, ctx](const std::string& why) {
    ctx.log("error: parameter server: " + why);
    self->quit(caf::make_error(caf::sec::runtime_error, "parameter server: " + why));
  };
  st->dev = devices::make_cpu_compute(1);
  // The shards' start: the checkpoint this rank saved, else the initial parameters.
  saved_model saved;
  if (auto c = ctx.latest_checkpoint()) {
    try {
      auto oh = msgpack::unpack(c->data.data(), c->data.size());
      saved = oh.get().as<saved_model>();
    } catch (const std::exception& e) {
      fail(std::string("the checkpoint does not decode: ") + e.what());
      return {};
    }
  }
  std::vector<float> init;
  for (auto s : L.hosted_by(rank)) {
    shard_state sh;
    sh.s = s;
    sh.at = L.shard(s);
    sh.params = tensor::f32(sh.at.count);
    sh.velocity.assign(sh.at.count, 0.0f);
    if (auto it = saved.shards.find(s); it != saved.shards.end()) {
      if (it->second.size() != 2 * sh.at.count * sizeof(float)) {
        fail("the checkpoint's shard " + std::to_string(s) + " holds "
             + std::to_string(it->second.size() / 8) + " parameters, this one "
             + std::to_string(sh.at.count) + " (another hidden= or servers=?)");
        return {};
      }
      std::memcpy(sh.params.data(), it->second.data(), sh.at.count * sizeof(float));
      std::memcpy(sh.velocity.data(), it->second.data() + sh.at.count * sizeof(float),
                  sh.at.count * sizeof(float));
      sh.step = saved.step;
    } else {
      if (init.empty())
        init = initial_params(cfg.sizes, cfg.seed);
      std::memcpy(sh.params.data(), init.data() + sh.at.first, sh.at.count * sizeof(float));
    }
    auto n = static_cast<size_t>(W);
    for (size_t w = 0; w < n; ++w) {
      sh.grads.push_back(tensor::f32(sh.at.count));
      sh.push_hdr.emplace_back(dp::dtype::f64, push_fields);
      sh.reply_hdr.emplace_back(dp::dtype::f64, reply_length(W));
      if (L.async)
        sh.reply_copy.push_back(tensor::f32(sh.at.count));
    }
    sh.have.assign(n, 0);
    sh.pushes.assign(n, sh.step);
    sh.done.assign(n, 0);
    sh.held.assign(n, 0);
    sh.held_since.assign(n, clock_type::now());
    sh.compute.assign(n, 0.0);
    st->shards.push_back(std::move(sh));
  }
  init.clear();
  init.shrink_to_fit();
  if (L.async && cfg.split_by_speed && W > 1)
    for (auto& sh : st->shards)
      if (sh.s == 0)
        st->split = std::make_unique<async_split>(cfg.batch, W);
  ctx.log("parameter server" + std::string(L.async ? " (async, staleness " : " (sync")
          + (L.async ? std::to_string(L.staleness) + ")" : ")") + " of shard(s)"
          + [&] {
              std::string t;
              for (auto& sh : st->shards)
                t += " " + std::to_string(sh.s) + " [" + std::to_string(sh.at.first) + ", +"
                     + std::to_string(sh.at.count) + ")";
              return t;
            }()
          + (L.dedicated ? " on a rank of its own" : " beside worker " + std::to_string(rank)));

  auto post_push = [=](size_t i, int32_t w) {
    auto& sh = st->shards[i];
    auto uw = static_cast<size_t>(w);
    sh.have[uw] = 0;
    st->pending[dp.recv(w, ps_tag_for(push_header, sh.s), sh.push_hdr[uw])] = {i, server_state::recv_header, w};
    st->pending[dp.recv(w, ps_tag_for(push_grads, sh.s), sh.grads[uw])] = {i, server_state::recv_grads, w};
  };
  // Answers worker w with the shard's parameters (ps-async: a copy, as updates go on).
  auto reply_to = [=](size_t i, int32_t w, double held_s, const double* push) {
    auto& sh = st->shards[i];
    auto uw = static_cast<size_t>(w);
    double* h = f64(sh.reply_hdr[uw]);
    h[r_step] = static_cast<double>(L.async ? sh.pushes[uw] : sh.step);
    h[r_flags] = sh.stop ? flag_stop : 0;
    h[r_held] = held_s;
    h[r_samples] = sh.samples;
    if (push) {
      h[r_loss] = push[p_loss];
      h[r_correct] = push[p_correct];
    }
    for (size_t v = 0; v < static_cast<size_t>(W); ++v)
      h[reply_fields + v] = sh.compute[v];
    h[r_shares_from] = -1;
    if (st->split && sh.s == 0 && st->split->from() >= 0) {
      h[r_shares_from] = static_cast<double>(st->split->from());
      for (size_t v = 0; v < static_cast<size_t>(W); ++v)
        h[reply_fields + static_cast<size_t>(W) + v] = st->split->shares()[v];
    }
    tensor body = sh.params;
    if (L.async) {
      std::memcpy(sh.reply_copy[uw].data(), sh.params.data(), sh.at.count * sizeof(float));
      body = sh.reply_copy[uw];
    }
    sh.sends += 2;
    st->pending[dp.send(w, ps_tag_for(reply_header, sh.s), sh.reply_hdr[uw])] = {i, server_state::reply, w};
    st->pending[dp.send(w, ps_tag_for(reply_params, sh.s), body)] = {i, server_state::reply, w};
  };
  // The shard's state at `step` for the checkpoint: saved by this rank (dedicated) or sent
  // to the worker of this rank, which saves it with its own.
  auto snapshot = [=](size_t i, int64_t step) {
    auto& sh = st->shards[i];
    std::string bytes(2 * sh.at.count * sizeof(float), '\0');
    std::memcpy(bytes.data(), sh.params.data(), sh.at.count * sizeof(float));
    std::memcpy(bytes.data() + sh.at.count * sizeof(float), sh.velocity.data(),
                sh.at.count * sizeof(float));
    if (L.dedicated) {
      saved_model m;
      m.step = step;
      m.shards[sh.s] = std::move(bytes);
      msgpack::sbuffer buf;
      msgpack::pack(buf, m);
      ctx.save_checkpoint(step, std::string(buf.data(), buf.size()));
    } else {
      shard_snapshot snap{sh.s, step, std::move(bytes)};
      caf::anon_send(ctx.peer(rank), monkey::app::pack(rank, snap));
    }
  };
  // ps-async: the slowest worker that has not ended (ended ones: no bound).
  auto slowest = [=](size_t i) {
    auto& sh = st->shards[i];
    int64_t low = std::numeric_limits<int64_t>::max();
    for (size_t w = 0; w < static_cast<size_t>(W); ++w)
      if (!sh.done[w])
        low = std::min(low, sh.pushes[w]);
    return low;
  };
  auto snapshots_due = [=](size_t i) {
    auto& sh = st->shards[i];
    auto low = L.async ? slowest(i) : sh.step;
    while (!sh.snapshot_at.empty() && *sh.snapshot_at.begin() <= low) {
      snapshot(i, *sh.snapshot_at.begin());
      sh.snapshot_at.erase(sh.snapshot_at.begin());
    }
  };
  auto maybe_quit = [=] {
    for (auto& sh : st->shards)
      if (!sh.ended || sh.sends > 0)
        return;
    self->quit();
  };
  // ps-sync: once every worker's push of the step is in and the last replies are out, sum
  // the gradients in worker order (the same sum on every run), take the SGD step, answer.
  auto sync_step = [=](size_t i) {
    auto& sh = st->shards[i];
    if (sh.ended || sh.sends > 0)
      return;
    for (size_t w = 0; w < static_cast<size_t>(W); ++w)
      if (sh.have[w] < 2)
        return;
    int flags = 0;
    double loss = 0, correct = 0;
    for (size_t w = 0; w < static_cast<size_t>(W); ++w) {
      auto* h = f64(sh.push_hdr[w]);
      if (static_cast<int64_t>(h[p_step]) != sh.step)
        return fail("worker " + std::to_string(w) + " pushed step "
                    + std::to_string(static_cast<int64_t>(h[p_step])) + " to shard "
                    + std::to_string(sh.s) + ", which is at step " + std::to_string(sh.step));
      flags |= static_cast<int>(h[p_flags]);
      loss += h[p_loss];
      correct += h[p_correct];
      sh.compute[w] = h[p_compute];
      sh.samples += h[p_rows];
      if (w > 0)
        st->dev->axpy(1.0f, sh.grads[w].f32(), sh.grads[0].f32(), sh.at.count);
    }
    st->dev->sgd(sh.params.f32(), sh.velocity.data(), sh.grads[0].f32(), sh.at.count, cfg.lr,
                 cfg.momentum, cfg.weight_decay);
    sh.step += 1;
    sh.stop = sh.stop || (flags & flag_stop);
    if (flags & (flag_ckpt | flag_stop))
      sh.snapshot_at.insert(sh.step);
    snapshots_due(i);
    bool last = flags & (flag_stop | flag_last);
    if (!last)
      for (int32_t w = 0; w < W; ++w)
        post_push(i, w);
    double totals[push_fields] = {};
    totals[p_loss] = loss;
    totals[p_correct] = correct;
    for (int32_t w = 0; w < W; ++w)
      reply_to(i, w, 0, totals);
    sh.ended = last;
  };
  // ps-async: answers the workers whose reply waits while they are within the bound.
  auto release_held = [=](size_t i) {
    auto& sh = st->shards[i];
    auto low = slowest(i);
    for (int32_t w = 0; w < W; ++w) {
      auto uw = static_cast<size_t>(w);
      if (sh.held[uw] && (sh.stop || sh.pushes[uw] - low <= L.staleness)) {
        sh.held[uw] = 0;
        reply_to(i, w, std::chrono::duration<double>(clock_type::now() - sh.held_since[uw]).count(),
                 f64(sh.push_hdr[uw]));
      }
    }
  };
  // ps-async: each push is applied at once; its reply waits while the worker is more than
  // `staleness` steps ahead of the slowest.
  auto async_push = [=](size_t i, int32_t w) {
    auto& sh = st->shards[i];
    auto uw = static_cast<size_t>(w);
    auto* h = f64(sh.push_hdr[uw]);
    int flags = static_cast<int>(h[p_flags]);
    if (flags & flag_done) {
      sh.done[uw] = 1;
      if (st->split && sh.s == 0)
        st->split->ended(w);
    } else {
      if (static_cast<int64_t>(h[p_step]) != sh.pushes[uw])
        return fail("worker " + std::to_string(w) + " pushed step "
                    + std::to_string(static_cast<int64_t>(h[p_step])) + " to shard "
                    + std::to_string(sh.s) + ", which expected its step "
                    + std::to_string(sh.pushes[uw]));
      st->dev->sgd(sh.params.f32(), sh.velocity.data(), sh.grads[uw].f32(), sh.at.count,
                   cfg.lr, cfg.momentum, cfg.weight_decay);
      sh.pushes[uw] += 1;
      sh.compute[uw] = h[p_compute];
      sh.samples += h[p_rows];
      if (st->split && sh.s == 0
          && st->split->pushed(w, static_cast<int64_t>(h[p_step]), h[p_compute],
                               static_cast<int>(h[p_rows])))
        ctx.log("step " + std::to_string(st->split->from()) + " on: shares "
                + shares_text(st->split->shares()) + " by the workers' measured speed");
      sh.stop = sh.stop || (flags & flag_stop);
      if (flags & flag_ckpt)
        sh.snapshot_at.insert(sh.pushes[uw]);
      post_push(i, w);
      sh.held[uw] = 1;
      sh.held_since[uw] = clock_type::now();
    }
    release_held(i);
    snapshots_due(i);
    if (std::all_of(sh.done.begin(), sh.done.end(), [](char d) { return d != 0; })) {
      sh.snapshot_at.clear(); // no step of them is reached by every worker any more
      sh.ended = true;
    }
  };

  // The start: every worker gets the shards' parameters (initial or restored).
  for (size_t i = 0; i < st->shards.size(); ++i) {
    for (int32_t w = 0; w < W; ++w)
      post_push(i, w);
    for (int32_t w = 0; w < W; ++w)
      reply_to(i, w, 0, nullptr);
  }

  return {
    [=](const monkey::app::tensor_done& d) {
      auto it = st->pending.find(d.op);
      if (it == st->pending.end())
        return;
      auto o = it->second;
      st->pending.erase(it);
      if (!d.ok())
        return fail(d.error);
      auto& sh = st->shards[o.shard];
      if (o.what == server_state::reply) {
        sh.sends -= 1;
        if (!L.async && sh.sends == 0)
          sync_step(o.shard);
        return maybe_quit();
      }
      auto uw = static_cast<size_t>(o.worker);
      if (++sh.have[uw] < 2)
        return;
      if (L.async)
        async_push(o.shard, o.worker);
      else
        sync_step(o.shard);
      maybe_quit();
    },
  };
}

} // namespace monkey::fmnist
