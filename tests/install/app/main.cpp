// SPDX-License-Identifier: Apache-2.0
// A tiny app built against an installed Monkey, as a user's project would be: every rank
// reports its parameter and says hello to rank 0, which succeeds once it heard from all.
#include <set>

#include <monkey/app.hpp>

namespace {

struct hi {
  int32_t rank = 0;
  MSGPACK_DEFINE(rank);
};

caf::behavior greeter(caf::event_based_actor* self, monkey::app::context ctx) {
  ctx.report(0, {{"lr", ctx.param_float("lr")}, {"rank", static_cast<double>(ctx.rank())}});
  ctx.log("hello from rank " + std::to_string(ctx.rank()) + " of job " + ctx.job_id());
  if (ctx.rank() != 0) {
    ctx.send(0, hi{ctx.rank()});
    self->quit();
    return {};
  }
  auto heard = std::make_shared<std::set<int32_t>>();
  auto check = [=] {
    if (static_cast<int32_t>(heard->size()) + 1 == ctx.world_size())
      self->quit();
  };
  check();
  return {
    [=](const monkey::app_message& m) {
      if (auto h = monkey::app::as<hi>(m))
        heard->insert(h->rank);
      check();
    },
  };
}

monkey::app::definition define() {
  monkey::app::definition app{"greet", "ranks say hello to rank 0"};
  app.float_param("lr", 0.1, 0.0, 10.0, "a parameter to report");
  app.entry("greeter", greeter);
  return app;
}

} // namespace

MONKEY_APP(define)
