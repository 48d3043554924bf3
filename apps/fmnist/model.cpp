// SPDX-License-Identifier: Apache-2.0
#include "apps/fmnist/model.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace monkey::fmnist {

expected<std::vector<int>> parse_hidden(const std::string& text) {
  std::vector<int> out;
  if (text.empty())
    return out;
  size_t at = 0;
  while (at <= text.size()) {
    auto comma = text.find(',', at);
    auto part = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (part.empty() || part.size() > 6
        || part.find_first_not_of("0123456789") != std::string::npos)
      return failure{"hidden: '" + part + "' in '" + text
                     + "' is not a layer width (widths are numbers separated by commas, e.g. 512,256)"};
    auto width = std::stoi(part);
    if (width < 1 || width > 65536)
      return failure{"hidden: a layer of " + part + " units (1 to 65536)"};
    out.push_back(width);
    if (comma == std::string::npos)
      break;
    at = comma + 1;
  }
  if (out.size() > 8)
    return failure{"hidden: " + std::to_string(out.size()) + " layers (at most 8)"};
  return out;
}

size_t param_count(const std::vector<int>& sizes) {
  size_t n = 0;
  for (size_t l = 1; l < sizes.size(); ++l)
    n += static_cast<size_t>(sizes[l - 1]) * static_cast<size_t>(sizes[l]) + static_cast<size_t>(sizes[l]);
  return n;
}

double train_flops_per_sample(const std::vector<int>& sizes) {
  double w = 0;
  for (size_t l = 1; l < sizes.size(); ++l)
    w += static_cast<double>(sizes[l - 1]) * sizes[l];
  // Forward 2 FLOPs per weight, the weights' gradient 2, the inputs' gradient 2 except for
  // the first layer (nothing needs the gradient of the data).
  double first = sizes.size() > 1 ? static_cast<double>(sizes[0]) * sizes[1] : 0;
  return 6 * w - 2 * first;
}

mlp::mlp(devices::compute& c, std::vector<int> sizes, int max_rows, float* grads, float* weights)
  : c_(c), sizes_(std::move(sizes)), max_rows_(max_rows), count_(param_count(sizes_)) {
  size_t at = 0;
  for (int l = 1; l <= layers(); ++l) {
    offsets_.push_back(at);
    at += static_cast<size_t>(sizes_[static_cast<size_t>(l - 1)]) * static_cast<size_t>(sizes_[static_cast<size_t>(l)])
          + static_cast<size_t>(sizes_[static_cast<size_t>(l)]);
  }
  if (weights && !c_.gpu())
    w_ext_ = weights;
  else
    w_ = devices::device_array<float>(c_, count_);
  v_ = devices::device_array<float>(c_, count_);
  if (grads && !c_.gpu())
    g_ = grads;
  else
    own_g_ = devices::device_array<float>(c_, count_);
  auto rows = static_cast<size_t>(max_rows_);
  x_ = devices::device_array<float>(c_, rows * static_cast<size_t>(sizes_.front()));
  labels_ = devices::device_array<int32_t>(c_, rows);
  int widest = 0;
  for (int l = 1; l <= layers(); ++l) {
    acts_.emplace_back(c_, rows * static_cast<size_t>(sizes_[static_cast<size_t>(l)]));
    widest = std::max(widest, sizes_[static_cast<size_t>(l)]);
  }
  delta_a_ = devices::device_array<float>(c_, rows * static_cast<size_t>(widest));
  delta_b_ = devices::device_array<float>(c_, rows * static_cast<size_t>(widest));
  if (c_.gpu()) {
    staging_.resize(rows * static_cast<size_t>(sizes_.front()));
    staging_labels_.resize(rows);
  }
}

mlp::range mlp::layer_range(int l) const {
  auto in = static_cast<size_t>(sizes_[static_cast<size_t>(l - 1)]);
  auto out = static_cast<size_t>(sizes_[static_cast<size_t>(l)]);
  return {offsets_[static_cast<size_t>(l - 1)], in * out + out};
}

std::vector<float> initial_params(const std::vector<int>& sizes, uint64_t seed) {
  std::vector<float> host(param_count(sizes));
  uint64_t s = seed ^ 0x5DEECE66Dull;
  auto uniform = [&s] { // [0, 1) in steps of 2^-24
    return static_cast<float>(splitmix64(s) >> 40) * (1.0f / 16777216.0f);
  };
  size_t at = 0;
  for (size_t l = 1; l < sizes.size(); ++l) {
    auto count = static_cast<size_t>(sizes[l - 1]) * static_cast<size_t>(sizes[l])
                 + static_cast<size_t>(sizes[l]);
    float bound = 1.0f / std::sqrt(static_cast<float>(sizes[l - 1]));
    for (size_t k = 0; k < count; ++k)
      host[at + k] = (2.0f * uniform() - 1.0f) * bound;
    at += count;
  }
  return host;
}

void mlp::init(uint64_t seed) {
  auto host = initial_params(sizes_, seed);
  c_.upload(weights(), host.data(), count_ * sizeof(float));
  c_.fill(v_.get(), 0.0f, count_);
  c_.fill(gradients(), 0.0f, count_);
}

void mlp::load_batch(const dataset& d, const uint32_t* idx, int rows) {
  rows_ = std::min(rows, max_rows_);
  if (c_.gpu()) {
    gather(d, idx, rows_, staging_.data(), staging_labels_.data());
    x_.upload(staging_.data(), static_cast<size_t>(rows_) * static_cast<size_t>(d.pixels));
    labels_.upload(staging_labels_.data(), static_cast<size_t>(rows_));
  } else {
    gather(d, idx, rows_, x_.get(), labels_.get()); // the CPU's device memory is the host's
  }
}

void mlp::load_inputs(const float* x, const int32_t* labels, int rows) {
  rows_ = std::min(rows, max_rows_);
  x_.upload(x, static_cast<size_t>(rows_) * static_cast<size_t>(sizes_.front()));
  labels_.upload(labels, static_cast<size_t>(rows_));
}

void mlp::forward(int rows) {
  const float* in = x_.get();
  for (int l = 1; l <= layers(); ++l) {
    auto r = layer_range(l);
    int n_in = sizes_[static_cast<size_t>(l - 1)], n_out = sizes_[static_cast<size_t>(l)];
    const float* w = weights() + r.first;
    const float* b = w + static_cast<size_t>(n_in) * static_cast<size_t>(n_out);
    float* out = acts_[static_cast<size_t>(l - 1)].get();
    c_.gemm(false, false, rows, n_out, n_in, 1.0f, in, w, 0.0f, out);
    c_.bias_add(out, b, rows, n_out);
    if (l < layers())
      c_.relu(out, static_cast<size_t>(rows) * static_cast<size_t>(n_out));
    in = out;
  }
}

devices::xent_result mlp::train_pass(float grad_scale, const std::function<void(int)>& ready) {
  int rows = rows_;
  forward(rows);
  float* delta = delta_a_.get();
  float* other = delta_b_.get();
  auto res = c_.softmax_xent(acts_.back().get(), labels_.get(), rows, sizes_.back(), grad_scale, delta);
  last_ = res;
  for (int l = layers(); l >= 1; --l) {
    auto r = layer_range(l);
    int n_in = sizes_[static_cast<size_t>(l - 1)], n_out = sizes_[static_cast<size_t>(l)];
    const float* in = l > 1 ? acts_[static_cast<size_t>(l - 2)].get() : x_.get();
    float* gw = gradients() + r.first;
    float* gb = gw + static_cast<size_t>(n_in) * static_cast<size_t>(n_out);
    c_.gemm(true, false, n_in, n_out, rows, 1.0f, in, delta, 0.0f, gw);
    c_.bias_grad(delta, gb, rows, n_out);
    if (l > 1) {
      const float* w = weights() + r.first;
      c_.gemm(false, true, rows, n_in, n_out, 1.0f, delta, w, 0.0f, other);
      c_.relu_grad(in, other, static_cast<size_t>(rows) * static_cast<size_t>(n_in));
      std::swap(delta, other);
    }
    if (ready)
      ready(l);
  }
  return res;
}

devices::xent_result mlp::evaluate_batch() {
  forward(rows_);
  return c_.softmax_xent(acts_.back().get(), labels_.get(), rows_, sizes_.back(), 1.0f, nullptr);
}

mlp::score mlp::evaluate(const dataset& d) {
  std::vector<uint32_t> idx(static_cast<size_t>(max_rows_));
  double loss = 0;
  int64_t correct = 0;
  for (int32_t at = 0; at < d.count; at += max_rows_) {
    int rows = std::min(max_rows_, d.count - at);
    for (int r = 0; r < rows; ++r)
      idx[static_cast<size_t>(r)] = static_cast<uint32_t>(at + r);
    load_batch(d, idx.data(), rows);
    auto res = evaluate_batch();
    loss += res.loss_sum;
    correct += res.correct;
  }
  if (d.count == 0)
    return {};
  return {loss / d.count, static_cast<double>(correct) / d.count};
}

void mlp::sgd(float lr, float momentum, float weight_decay) {
  c_.sgd(weights(), v_.get(), gradients(), count_, lr, momentum, weight_decay);
}

std::vector<float> mlp::save() const {
  std::vector<float> out(2 * count_);
  c_.download(out.data(), weights(), count_ * sizeof(float));
  v_.download(out.data() + count_, count_);
  return out;
}

status mlp::restore(const std::vector<float>& state) {
  if (state.size() != 2 * count_)
    return failure{"the saved model holds " + std::to_string(state.size() / 2)
                   + " parameters, this one " + std::to_string(count_)
                   + " (another hidden= than the run that saved it?)"};
  c_.upload(weights(), state.data(), count_ * sizeof(float));
  v_.upload(state.data() + count_, count_);
  return {};
}

} // namespace monkey::fmnist
