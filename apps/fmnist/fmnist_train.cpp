// SPDX-License-Identifier: Apache-2.0
// fmnist_train: the fmnist model trained in one process, without CAF or a cluster
// (docs/fmnist.md): the compute bound of the benchmarks (GEMM speed ÷ FLOPs per sample, side
// by side with the measured training throughput) and what scripts/device-check runs on a
// bare GPU machine. The same data, model, batch order and optimizer as the app's `single`.
//
//   fmnist_train [--epochs 1] [--hidden 512,256] [--batch 256] [--lr 0.05] [--momentum 0.9]
//                [--device cpu|cuda] [--threads 1] [--seed 1] [--data DIR] [--steps N]
//                [--bound on|off]
// --bound off skips measuring the GEMM speed (the compute bound): what a trial driven by
// another tuner (bench/sweep_vs_optuna.py) runs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cblas.h>

#include "apps/fmnist/data.hpp"
#include "apps/fmnist/model.hpp"
#include "devices/device.hpp"

using namespace monkey;
using namespace monkey::fmnist;

namespace {

int usage(const char* why) {
  std::fprintf(stderr,
               "fmnist_train: %s\n"
               "usage: fmnist_train [--epochs N] [--hidden 512,256] [--batch 256] [--lr 0.05]\n"
               "                    [--momentum 0.9] [--device cpu|cuda] [--threads N] [--seed S]\n"
               "                    [--data DIR] [--steps N (per epoch, 0: all)] [--bound on|off]\n",
               why);
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  int epochs = 1, batch = 256, threads = 1, steps_cap = 0;
  float lr = 0.05f, momentum = 0.9f;
  uint64_t seed = 1;
  std::string hidden_text = "512,256", device = "cpu", dir = default_data_dir;
  bool measure = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc)
      return usage(("option " + a + " needs a value").c_str());
    std::string v = argv[++i];
    if (a == "--epochs")
      epochs = std::atoi(v.c_str());
    else if (a == "--hidden")
      hidden_text = v;
    else if (a == "--batch")
      batch = std::atoi(v.c_str());
    else if (a == "--lr")
      lr = static_cast<float>(std::atof(v.c_str()));
    else if (a == "--momentum")
      momentum = static_cast<float>(std::atof(v.c_str()));
    else if (a == "--device")
      device = v;
    else if (a == "--threads")
      threads = std::atoi(v.c_str());
    else if (a == "--seed")
      seed = std::strtoull(v.c_str(), nullptr, 10);
    else if (a == "--data")
      dir = v;
    else if (a == "--steps")
      steps_cap = std::atoi(v.c_str());
    else if (a == "--bound" && v != "on" && v != "off")
      return usage("--bound is on or off");
    else if (a == "--bound")
      measure = v == "on";
    else
      return usage(("unknown option " + a).c_str());
  }
  if (epochs < 1 || batch < 1 || threads < 1)
    return usage("--epochs, --batch and --threads must be at least 1");
  auto hidden = parse_hidden(hidden_text);
  if (!hidden)
    return usage(hidden.error().c_str());
  std::unique_ptr<devices::compute> dev;
  if (device == "cuda") {
    std::string why;
    dev = devices::make_cuda_compute(0, &why);
    if (!dev) {
      std::fprintf(stderr, "fmnist_train: --device cuda: %s\n", why.c_str());
      return 1;
    }
  } else if (device == "cpu") {
    dev = devices::make_cpu_compute(threads);
  } else {
    return usage("--device is cpu or cuda");
  }
  auto train = load_split(dir, "train");
  auto test = load_split(dir, "t10k");
  if (!train || !test) {
    std::fprintf(stderr, "fmnist_train: %s\n", (!train ? train.error() : test.error()).c_str());
    return 1;
  }
  std::vector<int> sizes = {image_pixels};
  sizes.insert(sizes.end(), hidden->begin(), hidden->end());
  sizes.push_back(classes);
  mlp m(*dev, sizes, std::max(batch, 1000));
  m.init(seed);
  // The compute bound: the device's GEMM speed over the FLOPs of one training sample.
  double gflops = !measure    ? 0
                  : dev->gpu() ? devices::measure_gpu_gflops(0)
                               : devices::measure_cpu_gflops(threads);
  double bound = gflops * 1e9 / train_flops_per_sample(sizes);
  if (measure)
    std::printf("fmnist_train: %s (OpenBLAS %s kernels), MLP %s (%zu parameters), batch %d; GEMM "
                "%.1f GFLOP/s, %.0f FLOP per sample: bound %.0f samples/s\n",
                dev->name().c_str(), openblas_get_corename(), hidden_text.c_str(), m.params(),
                batch, gflops, train_flops_per_sample(sizes), bound);
  else
    std::printf("fmnist_train: %s (OpenBLAS %s kernels), MLP %s (%zu parameters), batch %d\n",
                dev->name().c_str(), openblas_get_corename(), hidden_text.c_str(), m.params(),
                batch);
  int steps = train->count / batch;
  if (steps_cap > 0)
    steps = std::min(steps, steps_cap);
  std::vector<double> rates;
  auto start = std::chrono::steady_clock::now();
  for (int e = 0; e < epochs; ++e) {
    auto order = epoch_order(train->count, seed, e);
    double loss = 0;
    for (int s = 0; s < steps; ++s) {
      auto t0 = std::chrono::steady_clock::now();
      m.load_batch(*train, order.data() + static_cast<size_t>(s) * static_cast<size_t>(batch), batch);
      loss += m.train_pass(1.0f / static_cast<float>(batch)).loss_sum / batch;
      m.sgd(lr, momentum, 0.0f);
      dev->synchronize();
      rates.push_back(batch / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    auto score = m.evaluate(*test);
    std::printf("epoch %d: train loss %.4f, test accuracy %.4f, %.1f s\n", e + 1, loss / steps,
                score.accuracy,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    std::fflush(stdout);
  }
  std::sort(rates.begin(), rates.end());
  double median = rates[rates.size() / 2];
  if (measure)
    std::printf("train device=%s samples_per_s=%.0f bound_samples_per_s=%.0f ratio=%.2f\n",
                dev->gpu() ? "cuda" : "cpu", median, bound, median / bound);
  else
    std::printf("train device=%s samples_per_s=%.0f\n", dev->gpu() ? "cuda" : "cpu", median);
  return 0;
}
