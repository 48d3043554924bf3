// SPDX-License-Identifier: Apache-2.0
// monkey-measure: measures device speed in a short-lived process, so a crashing driver or
// a slow measurement never takes the runtime with it. Prints "NAME GFLOPS" per device.
//   monkey-measure --cpus 2 --gpu 0 --gpu 1
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "devices/device.hpp"

int main(int argc, char** argv) {
  int cpus = 1;
  std::vector<int> gpus;
  CLI::App app{"monkey-measure: GEMM speed of this machine's devices"};
  app.add_option("--cpus", cpus, "threads for the CPU measurement");
  app.add_option("--gpu", gpus, "CUDA device index to measure (repeatable)");
  CLI11_PARSE(app, argc, argv);
  std::printf("cpu0 %.1f\n", monkey::devices::measure_cpu_gflops(cpus));
  std::fflush(stdout);
  for (int g : gpus) {
    std::printf("cuda%d %.1f\n", g, monkey::devices::measure_gpu_gflops(g));
    std::fflush(stdout);
  }
  return 0;
}
