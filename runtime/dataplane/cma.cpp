// SPDX-License-Identifier: Apache-2.0
#include "runtime/dataplane/cma.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/uio.h>

#include "runtime/dataplane/reduce.hpp"

namespace monkey::dp::cma {

uint64_t max_bytes() {
  static const uint64_t most = [] {
    auto* v = std::getenv("MONKEY_DP_CMA_MAX_MB");
    return (v ? std::strtoull(v, nullptr, 10) : 32) << 20;
  }();
  return most;
}

status read(int32_t pid, uint64_t addr, void* dst, uint64_t n) {
  auto* to = static_cast<uint8_t*>(dst);
  if (pid == same_process) {
    std::memcpy(to, reinterpret_cast<const void*>(addr), n);
    return {};
  }
  while (n > 0) {
    iovec local{to, n};
    iovec remote{reinterpret_cast<void*>(addr), n};
    auto got = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (got <= 0) {
      auto err = errno;
      std::string sys = "process_vm_readv: " + (got == 0 ? std::string("nothing read")
                                                          : std::string(std::strerror(err)));
      if (got < 0 && err == ESRCH)
        return failure{"its process went away (" + sys + ")"};
      if (got < 0 && err == EFAULT)
        return failure{"the range is not mapped in its process (" + sys + ")"};
      if (got < 0 && err == EPERM)
        return failure{"this process may not read its memory (" + sys + ")"};
      return failure{sys};
    }
    addr += static_cast<uint64_t>(got);
    to += got;
    n -= static_cast<uint64_t>(got);
  }
  return {};
}

status add(int32_t pid, uint64_t addr, dtype t, void* dst, uint64_t count,
           std::vector<uint8_t>& scratch) {
  auto* to = static_cast<uint8_t*>(dst);
  const uint64_t esz = dtype_size(t);
  if (pid == same_process) {
    add_elems(t, to, reinterpret_cast<const void*>(addr), count);
    return {};
  }
  constexpr uint64_t piece_bytes = 64 << 10;
  const uint64_t piece = std::max<uint64_t>(piece_bytes / esz, 1);
  if (scratch.size() < piece * esz)
    scratch.resize(piece * esz);
  for (uint64_t o = 0; o < count; o += piece) {
    auto len = std::min(piece, count - o);
    if (auto ok = read(pid, addr + o * esz, scratch.data(), len * esz); !ok)
      return ok;
    add_elems(t, to + o * esz, scratch.data(), len);
  }
  return {};
}

} // namespace monkey::dp::cma
