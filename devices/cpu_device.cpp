// SPDX-License-Identifier: Apache-2.0
#include "devices/device.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <vector>

#include <cblas.h>
#include <sys/sysinfo.h>
#include <unistd.h>

namespace monkey::devices {

device_info discover_cpu() {
  device_info d;
  d.name = "cpu0";
  d.kind = "cpu";
  d.slots = static_cast<int32_t>(::sysconf(_SC_NPROCESSORS_ONLN));
  struct sysinfo si {};
  if (::sysinfo(&si) == 0)
    d.memory_mb = static_cast<int64_t>(si.totalram) * si.mem_unit / (1024 * 1024);
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos)
        d.model = line.substr(colon + 2);
      break;
    }
  }
  if (d.model.empty())
    d.model = "unknown CPU";
  return d;
}

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
std::vector<device_info> discover_gpus(std::string* why_none) {
  if (why_none)
    *why_none = "this build has no CUDA support (nvcc was not found at build time)";
  return {};
}

bool built_with_cuda() {
  return false;
}

double measure_gpu_gflops(int, int) {
  return 0;
}

std::string gpu_self_test(int) {
  return "this build has no CUDA support";
}
#endif

} // namespace monkey::devices
