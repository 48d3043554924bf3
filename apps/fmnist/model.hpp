// SPDX-License-Identifier: Apache-2.0
#pragma once
// The fmnist app's model (issue #12; docs/fmnist.md): a multi-layer perceptron with ReLU
// between its layers and softmax cross-entropy at its end, on one compute device
// (devices/compute.hpp). Its parameters, their gradients and the momentum are each one flat
// array, layer after layer ([W1 b1 W2 b2 ...], W row-major in×out), so that one all-reduce
// or one parameter-server shard covers any range of them. Plain C++: no CAF (model.test.cpp).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "apps/fmnist/data.hpp"
#include "devices/compute.hpp"
#include "runtime/expected.hpp"

namespace monkey::fmnist {

/// "512,256" → {512, 256}: the hidden layers' widths (each 1..65536; at most 8 layers; ""
/// for none). The failure names the part that is wrong.
expected<std::vector<int>> parse_hidden(const std::string& text);

/// Parameters of an MLP with layer widths `sizes` (input, hidden..., output).
size_t param_count(const std::vector<int>& sizes);

/// FLOPs of one training sample in the GEMMs (6 per weight, but 4 for the first layer's:
/// nothing needs the gradient of the input).
double train_flops_per_sample(const std::vector<int>& sizes);

/// The initial parameters of an MLP of `sizes` from `seed` as mlp::init sets them (a
/// parameter server's shard takes its range).
std::vector<float> initial_params(const std::vector<int>& sizes, uint64_t seed);

class mlp {
public:
  /// Layer widths `sizes` ({784, 512, 256, 10}), batches of up to `max_rows`. `grads`:
  /// memory of param_count(sizes) floats the gradients are written to when the device is
  /// the CPU (a data plane tensor: no copy before an all-reduce); null: the model's own.
  /// `weights`: likewise for the parameters (a parameter server's replies land there).
  mlp(devices::compute& c, std::vector<int> sizes, int max_rows, float* grads = nullptr,
      float* weights = nullptr);

  const std::vector<int>& sizes() const { return sizes_; }
  size_t params() const { return count_; }
  int layers() const { return static_cast<int>(sizes_.size()) - 1; }
  /// Layer l's (1-based) range [first, first + count) of the flat arrays: W then b.
  struct range {
    size_t first = 0, count = 0;
  };
  range layer_range(int l) const;

  float* weights() { return w_ext_ ? w_ext_ : w_.get(); }
  const float* weights() const { return w_ext_ ? w_ext_ : w_.get(); }
  float* gradients() { return g_ ? g_ : own_g_.get(); }
  float* momentum() { return v_.get(); }
  devices::compute& device() { return c_; }

  /// PyTorch's default for a linear layer: W and b uniform in ±1/sqrt(fan_in), from
  /// `seed` (splitmix64: the same numbers on every machine); momentum zero.
  void init(uint64_t seed);

  /// Loads rows `idx[0..rows)` of `d` as the batch (d.pixels must be the input width).
  void load_batch(const dataset& d, const uint32_t* idx, int rows);
  /// Loads `rows` host rows of input width and their labels as the batch.
  void load_inputs(const float* x, const int32_t* labels, int rows);

  /// Forward and backward over the loaded batch: gradients = grad_scale × the sum over its
  /// rows of each row's loss gradient (grad_scale = 1 / global batch makes a worker's share
  /// of the global mean). `ready(l)` runs as soon as layer l's gradients are complete (the
  /// last layer first), e.g. to start their all-reduce while the backward pass goes on.
  devices::xent_result train_pass(float grad_scale, const std::function<void(int)>& ready = {});
  /// The loss and correct count of the pass under way (known from the forward pass on: the
  /// `ready` callbacks may read it).
  const devices::xent_result& pass_result() const { return last_; }

  /// The loss and correct count of the loaded batch (forward only).
  devices::xent_result evaluate_batch();

  /// The loss and accuracy of the whole `d` (in batches of max_rows).
  struct score {
    double loss = 0, accuracy = 0;
  };
  score evaluate(const dataset& d);

  /// SGD with momentum and weight decay over all parameters from the gradients.
  void sgd(float lr, float momentum, float weight_decay);

  /// The parameters (then the momentum) as host floats, and back.
  std::vector<float> save() const;
  status restore(const std::vector<float>& state);

private:
  void forward(int rows);

  devices::compute& c_;
  std::vector<int> sizes_;
  int max_rows_;
  int rows_ = 0;
  devices::xent_result last_;
  size_t count_;
  std::vector<size_t> offsets_; ///< per layer, where its W starts
  devices::device_array<float> w_, own_g_, v_;
  float* g_ = nullptr;
  float* w_ext_ = nullptr;
  devices::device_array<float> x_;                    ///< the batch (rows × input)
  devices::device_array<int32_t> labels_;
  std::vector<devices::device_array<float>> acts_;    ///< per layer, rows × width
  devices::device_array<float> delta_a_, delta_b_;    ///< the backward's ping-pong
  std::vector<float> staging_;                        ///< host floats (GPU only)
  std::vector<int32_t> staging_labels_;
};

} // namespace monkey::fmnist
