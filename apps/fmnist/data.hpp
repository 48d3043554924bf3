// SPDX-License-Identifier: Apache-2.0
#pragma once
// Fashion-MNIST as the Debian package dataset-fashion-mnist installs it (issue #12;
// docs/fmnist.md): IDX files, gzipped, in /usr/share/datasets/fashion-mnist. Images stay
// bytes in memory (47 MB for the training set) and become floats in [0, 1] a batch at a
// time. Plain C++: no CAF (data.test.cpp).

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/expected.hpp"

namespace monkey::fmnist {

constexpr const char* default_data_dir = "/usr/share/datasets/fashion-mnist";
constexpr int image_pixels = 28 * 28;
constexpr int classes = 10;

struct dataset {
  int32_t count = 0;
  int32_t pixels = 0;          ///< per image (rows × columns of the IDX file)
  std::vector<uint8_t> images; ///< count × pixels
  std::vector<int32_t> labels; ///< count, each in [0, classes)
};

/// Reads an IDX image file and its label file (gzipped or not). The failure names the file
/// and what is wrong with it: missing, not gzip or truncated, another magic number, counts
/// that differ, a label out of range.
expected<dataset> load_idx(const std::string& images_path, const std::string& labels_path);

/// The training set ("train") or the test set ("t10k") in `dir`; a missing directory says
/// how to install the package.
expected<dataset> load_split(const std::string& dir, const std::string& split);

/// Rows `idx[0..rows)` of `d` as floats in [0, 1] into `out` (rows × pixels), their labels
/// into `labels`.
void gather(const dataset& d, const uint32_t* idx, int rows, float* out, int32_t* labels);

/// splitmix64: the next 64 random bits from `state` (the same on every machine; the batch
/// order and the model's initial weights both draw from it).
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// The order of the training samples in `epoch`: a permutation of [0, count) that depends
/// only on the seed and the epoch (splitmix64 and Fisher–Yates: the same on every machine).
std::vector<uint32_t> epoch_order(int32_t count, uint64_t seed, int64_t epoch);

} // namespace monkey::fmnist
