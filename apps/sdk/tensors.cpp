// SPDX-License-Identifier: Apache-2.0
// A rank's tensors (monkey/app.hpp, docs/dataplane.md): each operation goes to the rank's
// communicator of the host's data plane; its end reaches the actor as a tensor_done.
#include <optional>

#include "host_state.hpp"

namespace monkey::app {

// ---- tensors -------------------------------------------------------------------------------------

namespace {

dp::reduce_op to_dp(reduce op) {
  return op == reduce::mean ? dp::reduce_op::mean : dp::reduce_op::sum;
}

} // namespace

std::pair<uint64_t, dp::completion> completion_for(host_state& host, const caf::actor& target) {
  auto op = host.next_op++;
  return {op, [op, target](const status& st, dp::buffer data) {
            tensor_done d;
            d.op = op;
            if (!st)
              d.error = st.error();
            d.data = std::move(data);
            caf::anon_send(target, std::move(d));
          }};
}

#define MONKEY_TENSOR_OP(call)                                                                     \
  auto [op, done] = completion_for(*host_, target_);                                               \
  auto plane = host_->plane();                                                                     \
  auto* comm = plane ? plane->comm(rank_) : nullptr;                                               \
  if (!comm)                                                                                       \
    done(failure{no_plane_reason(*host_)}, {});                                                    \
  else                                                                                             \
    comm->call;                                                                                    \
  return op;

namespace {

/// An app's tags are below 2^31 (the collectives use the others): the operation's id,
/// already failed, for one that is not.
std::optional<uint64_t> refuse_reserved(host_state& host, const caf::actor& target, uint32_t tag) {
  if ((tag & 0x80000000u) == 0)
    return std::nullopt;
  auto [op, done] = completion_for(host, target);
  done(failure{"tag " + std::to_string(tag) + " is reserved (tags are below 2^31)"}, {});
  return op;
}

} // namespace

uint64_t tensors::send(int32_t to, uint32_t tag, tensor t) const {
  if (auto refused = refuse_reserved(*host_, target_, tag))
    return *refused;
  MONKEY_TENSOR_OP(send(to, tag, std::move(t), std::move(done)))
}

uint64_t tensors::recv(int32_t from, uint32_t tag, tensor into) const {
  if (auto refused = refuse_reserved(*host_, target_, tag))
    return *refused;
  MONKEY_TENSOR_OP(recv(from, tag, std::move(into), std::move(done)))
}

uint64_t tensors::allreduce(tensor t, reduce r, std::vector<int32_t> group) const {
  MONKEY_TENSOR_OP(allreduce(std::move(t), to_dp(r), std::move(group), std::move(done)))
}

uint64_t tensors::broadcast(tensor t, int32_t root, std::vector<int32_t> group) const {
  MONKEY_TENSOR_OP(broadcast(std::move(t), root, std::move(group), std::move(done)))
}

uint64_t tensors::reduce_scatter(tensor in, tensor out, reduce r, std::vector<int32_t> group) const {
  MONKEY_TENSOR_OP(reduce_scatter(std::move(in), std::move(out), to_dp(r), std::move(group),
                                  std::move(done)))
}

uint64_t tensors::allgather(tensor in, tensor out, std::vector<int32_t> group) const {
  MONKEY_TENSOR_OP(allgather(std::move(in), std::move(out), std::move(group), std::move(done)))
}

#undef MONKEY_TENSOR_OP

tensor tensors::alloc(dtype t, uint64_t count) const {
  auto plane = host_->plane();
  auto* comm = plane ? plane->comm(rank_) : nullptr;
  return comm ? comm->alloc(t, count) : tensor(t, count);
}

bool tensors::registered(const tensor& t) const {
  auto plane = host_->plane();
  auto* comm = plane ? plane->comm(rank_) : nullptr;
  return comm && comm->registered(t);
}

std::string tensors::transport(int32_t peer) const {
  auto plane = host_->plane();
  auto* comm = plane ? plane->comm(rank_) : nullptr;
  return comm ? comm->transport(peer) : std::string{};
}

} // namespace monkey::app
