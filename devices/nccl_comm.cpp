// SPDX-License-Identifier: Apache-2.0
// NCCL over the CUDA runtime (built only where nvcc and NCCL exist), non-blocking: every
// wait polls, so that a member that died or froze fails the others (nccl.hpp).
#include "devices/nccl.hpp"

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

namespace monkey::devices {

struct nccl_comm::impl {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int device = 0;
  int world = 1;
  std::string broken; ///< why the communicator was aborted ("" while it works)
};

namespace {

using clock_type = std::chrono::steady_clock;

std::string cuda_text(cudaError_t e) {
  return std::string("CUDA: ") + cudaGetErrorString(e);
}

std::string nccl_text(ncclResult_t r) {
  return std::string("NCCL: ") + ncclGetErrorString(r);
}

/// Polls `done` ("" and true: finished; a reason: failed) until it finishes, `check` finds a
/// member gone, or `timeout` passes. Spins with yields for the first 2 ms, then sleeps 100 µs.
std::string poll(const std::function<std::pair<bool, std::string>()>& done, const nccl_check& check,
                 std::chrono::milliseconds timeout, const char* what) {
  auto start = clock_type::now();
  for (uint64_t round = 0;; ++round) {
    auto [finished, err] = done();
    if (!err.empty() || finished)
      return err;
    auto waited = clock_type::now() - start;
    if ((round & 63) == 0 && check)
      if (auto gone = check(); !gone.empty())
        return gone;
    if (timeout.count() > 0 && waited > timeout)
      return std::string("NCCL: ") + what + " timed out after "
             + std::to_string(timeout.count()) + " ms (a rank of the group froze?)";
    if (waited < std::chrono::milliseconds(2))
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

/// Whether the non-blocking communicator finished what it was doing ("" and true), still
/// works on it (false), or failed (the reason).
std::pair<bool, std::string> settled(ncclComm_t comm) {
  ncclResult_t state = ncclSuccess;
  if (auto r = ncclCommGetAsyncError(comm, &state); r != ncclSuccess)
    return {true, nccl_text(r)};
  if (state == ncclInProgress)
    return {false, {}};
  if (state != ncclSuccess)
    return {true, nccl_text(state)};
  return {true, {}};
}

bool nccl_type(dp::dtype t, ncclDataType_t& out) {
  switch (t) {
    case dp::dtype::f32: out = ncclFloat32; return true;
    case dp::dtype::f64: out = ncclFloat64; return true;
    case dp::dtype::i32: out = ncclInt32; return true;
    case dp::dtype::i64: out = ncclInt64; return true;
    case dp::dtype::u8: out = ncclUint8; return true;
    case dp::dtype::f16: out = ncclFloat16; return true;
    case dp::dtype::bf16: out = ncclBfloat16; return true;
  }
  return false;
}

} // namespace

std::string nccl_unavailable(int device) {
  int n = 0;
  auto e = cudaGetDeviceCount(&n);
  if (e == cudaErrorInsufficientDriver)
    return "no GPU here (no NVIDIA driver, or one older than this build's CUDA runtime)";
  if (e == cudaErrorNoDevice) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    return std::string("no GPU here (none visible")
           + (visible ? std::string(": CUDA_VISIBLE_DEVICES='") + visible + "'" : "") + ")";
  }
  if (e != cudaSuccess)
    return "no GPU here (" + cuda_text(e) + ")";
  if (n == 0)
    return "no GPU here";
  if (device < -1 || device >= n)
    return "no CUDA device " + std::to_string(device) + " here (" + std::to_string(n)
           + " visible)";
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
  if (!p_)
    return;
  if (p_->comm) {
    cudaSetDevice(p_->device);
    // A clean end lets the other ranks finish theirs; one that does not settle is aborted.
    bool clean = false;
    if (p_->broken.empty()) {
      auto r = ncclCommFinalize(p_->comm);
      clean = (r == ncclSuccess || r == ncclInProgress)
              && poll([&] { return settled(p_->comm); }, {}, std::chrono::seconds(10),
                      "finalizing")
                   .empty();
    }
    if (clean)
      ncclCommDestroy(p_->comm);
    else
      ncclCommAbort(p_->comm);
  }
  if (p_->stream)
    cudaStreamDestroy(p_->stream);
}

int nccl_comm::device() const {
  return p_->device;
}

std::unique_ptr<nccl_comm> nccl_comm::create(const std::string& unique_id, int rank, int world,
                                             int device, std::string* why,
                                             const nccl_check& check,
                                             std::chrono::milliseconds timeout) {
  auto fail = [&](const std::string& w) -> std::unique_ptr<nccl_comm> {
    if (why)
      *why = w;
    return nullptr;
  };
  if (auto no = nccl_unavailable(device); !no.empty())
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
    return fail(cuda_text(e) + " (device " + std::to_string(device) + ")");
  // A blocking stream: it waits for work on the legacy default stream (cudaMemcpy), but
  // not for other streams': the caller synchronizes those (nccl.hpp).
  if (auto e = cudaStreamCreate(&p->stream); e != cudaSuccess)
    return fail(cuda_text(e));
  auto out = std::unique_ptr<nccl_comm>(new nccl_comm(std::move(p)));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  auto r = ncclCommInitRankConfig(&out->p_->comm, world, id, rank, &config);
  std::string err;
  if (r != ncclSuccess && r != ncclInProgress)
    err = nccl_text(r);
  else
    err = poll([&] { return settled(out->p_->comm); }, check, timeout, "joining the group");
  if (!err.empty()) {
    out->p_->broken = err; // the destructor aborts it
    return fail(err);
  }
  return out;
}

std::string nccl_comm::allreduce(void* data, size_t count, dp::dtype t, bool mean,
                                 const nccl_check& check, std::chrono::milliseconds timeout) {
  auto& p = *p_;
  if (!p.broken.empty())
    return p.broken;
  ncclDataType_t type;
  if (!nccl_type(t, type))
    return "NCCL: no such element type";
  bool floating = t == dp::dtype::f32 || t == dp::dtype::f64 || t == dp::dtype::f16
                  || t == dp::dtype::bf16;
  if (mean && !floating)
    return "NCCL: the mean is defined for floating types only";
  if (auto e = cudaSetDevice(p.device); e != cudaSuccess)
    return cuda_text(e);
  auto fail = [&](std::string why) {
    p.broken = why;
    ncclCommAbort(p.comm); // wakes the kernels waiting for a peer that will never come
    p.comm = nullptr;
    return why;
  };
  auto r = ncclAllReduce(data, data, count, type, mean ? ncclAvg : ncclSum, p.comm, p.stream);
  if (r != ncclSuccess && r != ncclInProgress)
    return fail(nccl_text(r));
  auto started = clock_type::now();
  if (auto err = poll([&] { return settled(p.comm); }, check, timeout, "all-reduce");
      !err.empty())
    return fail(err);
  auto left = timeout.count() > 0
                ? std::max(std::chrono::milliseconds(1),
                           timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                                       clock_type::now() - started))
                : timeout;
  auto err = poll(
    [&]() -> std::pair<bool, std::string> {
      auto e = cudaStreamQuery(p.stream);
      if (e == cudaSuccess)
        return {true, {}};
      if (e != cudaErrorNotReady)
        return {true, cuda_text(e)};
      auto s = settled(p.comm); // a peer's failure shows here while the kernel waits
      return {false, s.second};
    },
    check, left, "all-reduce");
  if (!err.empty())
    return fail(err);
  return {};
}

std::string nccl_smoke_test(int index, size_t count) {
  std::string why;
  auto id = nccl_unique_id(&why);
  if (id.empty())
    return why;
  auto comm = nccl_comm::create(id, 0, 1, index, &why, {}, std::chrono::seconds(60));
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
    out = comm->allreduce(dev, count, dp::dtype::f32, false, {}, std::chrono::seconds(60));
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
