// SPDX-License-Identifier: Apache-2.0
#include "devices/device.hpp"

#include <fstream>
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

#ifndef MONKEY_HAVE_CUDA
std::vector<device_info> discover_gpus(std::string* why_none) {
  if (why_none)
    *why_none = "this build has no CUDA support (nvcc was not found at build time)";
  return {};
}

bool built_with_cuda() {
  return false;
}
#endif

} // namespace monkey::devices
