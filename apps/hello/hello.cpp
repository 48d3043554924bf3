// SPDX-License-Identifier: Apache-2.0
// hello: the smallest useful Monkey app. Every rank throws `samples` random points into the
// unit square each step, sends its count to every other rank (an app message of its own
// type), and once it has every rank's count for the step knows the gang's estimate of pi.
// Rank 0 reports `pi` and `error`; every rank reports `inside`. Every `checkpoint_every`
// steps each rank checkpoints the step it goes on at, and a new attempt (or a rank restarted
// by the policy) resumes there (rank 0 reports `resumed_at`). Parameters can make a rank
// fail (to see the restart policy) or crash its host (to see the job's retries).
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <map>
#include <random>

#include <monkey/app.hpp>

namespace {

/// One rank's count for one step: the app's own message type.
struct partial {
  static constexpr const char* monkey_type = "hello.partial";
  int64_t step = 0;
  int64_t inside = 0;
  int64_t total = 0;
  MSGPACK_DEFINE_MAP(step, inside, total);
};

/// What a rank checkpoints: the step it goes on at.
struct saved_state {
  int64_t next_step = 0;
  MSGPACK_DEFINE_MAP(next_step);
};

using next_step = caf::atom_constant<caf::atom("next_step")>;

struct rank_state {
  int64_t step = 0;
  std::map<int64_t, std::map<int32_t, partial>> counts; ///< step → rank → count
};

caf::behavior pi_rank(caf::event_based_actor* self, monkey::app::context ctx) {
  auto st = std::make_shared<rank_state>();
  auto steps = ctx.param_int("steps");
  auto samples = ctx.param_int("samples");
  auto pause = std::chrono::milliseconds(ctx.param_int("step_ms"));
  auto every = ctx.param_int("checkpoint_every");
  ctx.log("started: rank " + std::to_string(ctx.rank()) + " of " + std::to_string(ctx.world_size())
          + (ctx.restarts() > 0 ? ", restart " + std::to_string(ctx.restarts()) : ""));
  // A new attempt, or a restart by the policy, goes on from the newest checkpoint.
  if (auto c = ctx.latest_checkpoint()) {
    try {
      auto oh = msgpack::unpack(c->data.data(), c->data.size());
      st->step = oh.get().as<saved_state>().next_step;
      ctx.log("resumed at step " + std::to_string(st->step) + " from the checkpoint of step "
              + std::to_string(c->step));
      if (ctx.rank() == 0)
        ctx.report(st->step, {{"resumed_at", static_cast<double>(st->step)}});
    } catch (const std::exception& e) {
      ctx.log(std::string("the checkpoint does not decode (") + e.what() + "); starting at 0");
    }
  }
  // A step ends when every rank's count for it is in: the estimate, then the next step.
  auto settle = [=] {
    auto it = st->counts.find(st->step);
    if (it == st->counts.end() || static_cast<int32_t>(it->second.size()) < ctx.world_size())
      return;
    int64_t inside = 0, total = 0;
    for (auto& [r, p] : it->second)
      inside += p.inside, total += p.total;
    double pi = 4.0 * static_cast<double>(inside) / static_cast<double>(total);
    if (ctx.rank() == 0)
      ctx.report(st->step, {{"pi", pi}, {"error", std::fabs(pi - M_PI)}});
    st->counts.erase(it);
    st->step += 1;
    if (every > 0 && st->step % every == 0) {
      msgpack::sbuffer buf;
      msgpack::pack(buf, saved_state{st->step});
      ctx.save_checkpoint(st->step, std::string(buf.data(), buf.size()));
    }
    if (st->step >= steps) {
      ctx.log("done: pi is about " + std::to_string(pi));
      self->quit();
      return;
    }
    self->delayed_send(self, pause, next_step::value);
  };
  self->send(self, next_step::value);
  return {
    [=](next_step) {
      auto step = st->step;
      if (ctx.param_int("fail_rank") == ctx.rank() && ctx.param_int("fail_step") == step
          && ctx.restarts() == 0) {
        ctx.log("failing on purpose at step " + std::to_string(step));
        self->quit(caf::make_error(caf::sec::runtime_error, "failed on purpose (fail_rank)"));
        return;
      }
      if (ctx.param_int("crash_step") == step && ctx.rank() == 0) {
        auto how = ctx.param("crash");
        if (how == "segfault") {
          // The default action, whatever handler the build installed: under ASan its
          // SIGSEGV handler would turn the intended crash into a report and exit 1, and the
          // test of a host killed by a signal would test the sanitizer instead.
          std::signal(SIGSEGV, SIG_DFL);
          std::raise(SIGSEGV);
        }
        if (how == "abort")
          std::abort();
      }
      // The same points for a given seed, rank and step, whatever the attempt.
      std::mt19937_64 rng(ctx.seed() * 1000003u + static_cast<uint64_t>(ctx.rank()) * 7919u
                          + static_cast<uint64_t>(step));
      std::uniform_real_distribution<double> u(0.0, 1.0);
      partial p{step, 0, samples};
      for (int64_t i = 0; i < samples; ++i) {
        double x = u(rng), y = u(rng);
        p.inside += x * x + y * y <= 1.0;
      }
      ctx.report(step, {{"inside", static_cast<double>(p.inside) / static_cast<double>(samples)}});
      st->counts[step][ctx.rank()] = p;
      ctx.broadcast(p);
      settle();
    },
    [=](const monkey::app_message& m) {
      if (auto p = monkey::app::as<partial>(m)) {
        st->counts[p->step][m.from] = *p;
        settle();
      }
    },
  };
}

monkey::app::definition define() {
  monkey::app::definition app{"hello", "ranks estimate pi together, one exchange per step"};
  app.int_param("samples", 200000, 1, 100000000, "points each rank throws per step");
  app.int_param("steps", 20, 1, 1000000, "steps before the job succeeds");
  app.int_param("step_ms", 0, 0, 600000, "pause between steps (ms)");
  app.int_param("fail_rank", -1, -1, 4095, "this rank's actor fails once, at fail_step");
  app.int_param("fail_step", -1, -1, 1000000, "the step at which fail_rank fails");
  app.choice_param("crash", "none", {"none", "segfault", "abort"},
                   "rank 0 crashes its whole host at crash_step");
  app.int_param("crash_step", -1, -1, 1000000, "the step at which rank 0 crashes");
  app.int_param("checkpoint_every", 5, 0, 1000000,
                "every rank checkpoints every this many steps (0: never); a new attempt "
                "resumes at the newest checkpoint");
  app.entry("pi_rank", pi_rank);
  return app;
}

} // namespace

MONKEY_APP(define)
