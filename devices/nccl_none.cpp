// SPDX-License-Identifier: Apache-2.0
// NCCL in a build without it (no nvcc or no NCCL found): every call says so.
#include "devices/nccl.hpp"

namespace monkey::devices {

struct nccl_comm::impl {};

std::string nccl_unavailable(int) {
  return "this build has no NCCL (nvcc and NCCL were not found when it was configured)";
}

std::string nccl_unique_id(std::string* why) {
  if (why)
    *why = nccl_unavailable();
  return {};
}

std::unique_ptr<nccl_comm> nccl_comm::create(const std::string&, int, int, int, std::string* why,
                                             const nccl_check&, std::chrono::milliseconds) {
  if (why)
    *why = nccl_unavailable();
  return nullptr;
}

nccl_comm::nccl_comm(std::unique_ptr<impl> p) : p_(std::move(p)) {}
nccl_comm::~nccl_comm() = default;

std::string nccl_comm::allreduce(void*, size_t, dp::dtype, bool, const nccl_check&,
                                 std::chrono::milliseconds) {
  return nccl_unavailable();
}

int nccl_comm::device() const {
  return -1;
}

std::string nccl_smoke_test(int, size_t) {
  return nccl_unavailable();
}

} // namespace monkey::devices
