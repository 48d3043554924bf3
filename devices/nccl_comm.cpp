// SPDX-License-Identifier: Apache-2.0
// NCCL over the CUDA runtime (built only where nvcc and NCCL exist).
#include "devices/nccl.hpp"

#include <cstring>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

namespace monkey::devices {

struct nccl_comm::impl {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int device = 0;
  int world = 1;
};

namespace {

std::string cuda_text(cudaError_t e) {
  return std::string("CUDA: ") + cudaGetErrorString(e);
}

std::string nccl_text(ncclResult_t r) {
  return std::string("NCCL: ") + ncclGetErrorString(r);
}

} // namespace

std::string nccl_unavailable() {
  int n = 0;
  auto e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess)
    return "no GPU here (" + cuda_text(e) + ")";
  if (n == 0)
    return "no GPU here";
  return {};
}

std::string nccl_unique_id(std::string* why) {
  if (auto no = nccl_unavailable(); !no.empty()) {
    if (why)
      *why = no;
    return {};
  }
  ncclUniqueId id;
  if (auto r = ncclGetUniqueId(&id); r != ncclSuccess) {
    if (why)
      *why = nccl_text(r);
    return {};
  }
  return std::string(id.internal, sizeof(id.internal));
}

nccl_comm::nccl_comm(std::unique_ptr<impl> p) : p_(std::move(p)) {}

nccl_comm::~nccl_comm() {
  if (p_ && p_->comm)
    ncclCommDestroy(p_->comm);
  if (p_ && p_->stream)
    cudaStreamDestroy(p_->stream);
}

std::unique_ptr<nccl_comm> nccl_comm::create(const std::string& unique_id, int rank, int world,
                                             int device, std::string* why) {
  auto fail = [&](const std::string& w) -> std::unique_ptr<nccl_comm> {
    if (why)
      *why = w;
    return nullptr;
  };
  if (auto no = nccl_unavailable(); !no.empty())
    return fail(no);
  ncclUniqueId id;
  if (unique_id.size() != sizeof(id.internal))
    return fail("an NCCL unique id has " + std::to_string(sizeof(id.internal)) + " bytes, not "
                + std::to_string(unique_id.size()));
  std::memcpy(id.internal, unique_id.data(), sizeof(id.internal));
  auto p = std::make_unique<impl>();
  p->device = device;
  p->world = world;
  if (auto e = cudaSetDevice(device); e != cudaSuccess)
    return fail(cuda_text(e));
  if (auto e = cudaStreamCreate(&p->stream); e != cudaSuccess)
    return fail(cuda_text(e));
  if (auto r = ncclCommInitRank(&p->comm, world, id, rank); r != ncclSuccess) {
    cudaStreamDestroy(p->stream);
    return fail(nccl_text(r));
  }
  return std::unique_ptr<nccl_comm>(new nccl_comm(std::move(p)));
}

std::string nccl_comm::allreduce_f32(float* data, size_t count, bool mean) {
  cudaSetDevice(p_->device);
  auto op = mean ? ncclAvg : ncclSum;
  if (auto r = ncclAllReduce(data, data, count, ncclFloat32, op, p_->comm, p_->stream);
      r != ncclSuccess)
    return nccl_text(r);
  if (auto e = cudaStreamSynchronize(p_->stream); e != cudaSuccess)
    return cuda_text(e);
  return {};
}

std::string nccl_smoke_test(int index, size_t count) {
  std::string why;
  auto id = nccl_unique_id(&why);
  if (id.empty())
    return why;
  auto comm = nccl_comm::create(id, 0, 1, index, &why);
  if (!comm)
    return why;
  std::vector<float> host(count);
  for (size_t k = 0; k < count; ++k)
    host[k] = static_cast<float>(k % 7);
  float* dev = nullptr;
  if (auto e = cudaMalloc(&dev, count * sizeof(float)); e != cudaSuccess)
    return cuda_text(e);
  std::string out;
  if (auto e = cudaMemcpy(dev, host.data(), count * sizeof(float), cudaMemcpyHostToDevice);
      e != cudaSuccess)
    out = cuda_text(e);
  if (out.empty())
    out = comm->allreduce_f32(dev, count, false);
  std::vector<float> back(count);
  if (out.empty())
    if (auto e = cudaMemcpy(back.data(), dev, count * sizeof(float), cudaMemcpyDeviceToHost);
        e != cudaSuccess)
      out = cuda_text(e);
  cudaFree(dev);
  if (out.empty() && std::memcmp(back.data(), host.data(), count * sizeof(float)) != 0)
    out = "a one-rank all-reduce changed the data";
  return out;
}

} // namespace monkey::devices
