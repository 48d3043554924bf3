// SPDX-License-Identifier: Apache-2.0
// CPU measurement with OpenBLAS; linked only into monkey-measure and the tests (OpenBLAS
// allocates large buffers when loaded, which the runtime need not carry).
#include "devices/device.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include <cblas.h>

namespace monkey::devices {

double measure_cpu_gflops(int threads, int n) {
  openblas_set_num_threads(std::max(1, threads));
  std::vector<float> a(static_cast<size_t>(n) * n), b(a.size()), c(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(i % 7) * 0.25f;
    b[i] = static_cast<float>(i % 5) * 0.5f;
  }
  double best = 0;
  for (int rep = 0; rep < 4; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n,
                b.data(), n, 0.0f, c.data(), n);
    std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    if (rep > 0) // the first run warms caches and threads
      best = std::max(best, 2.0 * n * n * static_cast<double>(n) / dt.count() / 1e9);
  }
  return best;
}

#ifndef MONKEY_HAVE_CUDA
double measure_gpu_gflops(int, int) {
  return 0;
}

std::string gpu_self_test(int) {
  return "this build has no CUDA support";
}
#endif

} // namespace monkey::devices
