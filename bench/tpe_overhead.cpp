// SPDX-License-Identifier: Apache-2.0
// Monkey's TPE overhead per trial (suggest + finish) once FINISHED trials are known: the
// figure bench/sweep_vs_optuna.py sets beside Optuna's ask + tell. The space is the
// benchmark's (lr log-uniform, momentum uniform, hidden and batch choices); values random.
//   tpe_overhead [FINISHED] [MEASURED]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "runtime/sweep/optimizer.hpp"

using namespace monkey::sweep;

int main(int argc, char** argv) {
  int finished = argc > 1 ? std::atoi(argv[1]) : 1000;
  int measured = argc > 2 ? std::atoi(argv[2]) : 200;
  auto spec = parse_sweep_text(R"(
trial: {command: [train, "{lr}", "{momentum}", "{hidden}", "{batch}"]}
space:
  lr: {type: loguniform, low: 0.001, high: 0.5}
  momentum: {type: uniform, low: 0, high: 0.95}
  hidden: {type: choice, values: [32, 64, 128, 256]}
  batch: {type: choice, values: [64, 128, 256]}
metric: {name: acc}
algorithm: {name: tpe, seed: 1, startup: 10}
budget: {trials: 100000}
)",
                               "bench");
  if (!spec) {
    std::fprintf(stderr, "%s\n", spec.error().c_str());
    return 1;
  }
  auto opt = make_optimizer(*spec);
  if (!opt) {
    std::fprintf(stderr, "%s\n", opt.error().c_str());
    return 1;
  }
  std::mt19937_64 g(1);
  std::uniform_real_distribution<double> u(0, 1);
  int64_t id = 0;
  for (; id < finished; ++id) {
    (void) (*opt)->suggest();
    (*opt)->finish(id, u(g));
  }
  auto t0 = std::chrono::steady_clock::now();
  for (int k = 0; k < measured; ++k, ++id) {
    (void) (*opt)->suggest();
    (*opt)->finish(id, u(g));
  }
  auto us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
              .count() / measured;
  std::printf("monkey tpe suggest+finish %.0f us\n", us);
  return 0;
}
