// SPDX-License-Identifier: Apache-2.0
#include "apps/fmnist/model.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <unistd.h>

#include <zlib.h>

using namespace monkey;
using namespace monkey::fmnist;

namespace {

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::vector<float> v(n);
  for (auto& x : v)
    x = static_cast<float>(g() >> 8) / static_cast<float>(1 << 24) * 2 - 1;
  return v;
}

/// The MLP's loss and gradients in double, plainly: the reference.
struct reference_result {
  double loss = 0;
  std::vector<double> grads;
};

reference_result reference(const std::vector<int>& sizes, const std::vector<float>& w,
                           const std::vector<float>& x, const std::vector<int32_t>& labels,
                           int rows) {
  int layers = static_cast<int>(sizes.size()) - 1;
  std::vector<size_t> off;
  size_t at = 0;
  for (int l = 1; l <= layers; ++l) {
    off.push_back(at);
    at += static_cast<size_t>(sizes[l - 1] * sizes[l] + sizes[l]);
  }
  reference_result out;
  out.grads.assign(w.size(), 0.0);
  for (int r = 0; r < rows; ++r) {
    std::vector<std::vector<double>> a(1);
    for (int i = 0; i < sizes[0]; ++i)
      a[0].push_back(x[static_cast<size_t>(r * sizes[0] + i)]);
    for (int l = 1; l <= layers; ++l) {
      std::vector<double> z(static_cast<size_t>(sizes[l]));
      for (int j = 0; j < sizes[l]; ++j) {
        double s = w[off[l - 1] + static_cast<size_t>(sizes[l - 1] * sizes[l] + j)];
        for (int i = 0; i < sizes[l - 1]; ++i)
          s += a[l - 1][static_cast<size_t>(i)] * w[off[l - 1] + static_cast<size_t>(i * sizes[l] + j)];
        z[static_cast<size_t>(j)] = l < layers ? std::max(0.0, s) : s;
      }
      a.push_back(z);
    }
    auto& logits = a.back();
    double mx = *std::max_element(logits.begin(), logits.end()), sum = 0;
    for (double v : logits)
      sum += std::exp(v - mx);
    int label = labels[static_cast<size_t>(r)];
    out.loss += std::log(sum) - (logits[static_cast<size_t>(label)] - mx);
    std::vector<double> d(logits.size());
    for (size_t j = 0; j < d.size(); ++j)
      d[j] = std::exp(logits[j] - mx) / sum - (static_cast<int>(j) == label);
    for (int l = layers; l >= 1; --l) {
      std::vector<double> prev(static_cast<size_t>(sizes[l - 1]), 0.0);
      for (int j = 0; j < sizes[l]; ++j) {
        out.grads[off[l - 1] + static_cast<size_t>(sizes[l - 1] * sizes[l] + j)] += d[static_cast<size_t>(j)];
        for (int i = 0; i < sizes[l - 1]; ++i) {
          out.grads[off[l - 1] + static_cast<size_t>(i * sizes[l] + j)] += a[l - 1][static_cast<size_t>(i)] * d[static_cast<size_t>(j)];
          prev[static_cast<size_t>(i)] += w[off[l - 1] + static_cast<size_t>(i * sizes[l] + j)] * d[static_cast<size_t>(j)];
        }
      }
      if (l > 1)
        for (int i = 0; i < sizes[l - 1]; ++i)
          if (!(a[l - 1][static_cast<size_t>(i)] > 0))
            prev[static_cast<size_t>(i)] = 0;
      d = prev;
    }
  }
  return out;
}

struct temp_dir {
  std::string path;
  temp_dir() {
    char t[] = "/tmp/monkey-fmnist-XXXXXX";
    path = ::mkdtemp(t);
  }
  ~temp_dir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

void write_gz(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

std::vector<uint8_t> idx_images(uint32_t n, uint32_t rows = 28, uint32_t cols = 28) {
  std::vector<uint8_t> b = {0, 0, 8, 3};
  for (uint32_t v : {n, rows, cols})
    for (int s = 24; s >= 0; s -= 8)
      b.push_back(static_cast<uint8_t>(v >> s));
  for (uint32_t i = 0; i < n * rows * cols; ++i)
    b.push_back(static_cast<uint8_t>(i * 7));
  return b;
}

std::vector<uint8_t> idx_labels(uint32_t n, uint8_t first = 0) {
  std::vector<uint8_t> b = {0, 0, 8, 1};
  for (int s = 24; s >= 0; s -= 8)
    b.push_back(static_cast<uint8_t>(n >> s));
  for (uint32_t i = 0; i < n; ++i)
    b.push_back(static_cast<uint8_t>(i == 0 ? first : i % 10));
  return b;
}

} // namespace

TEST_CASE("hidden layer widths parse, and what is wrong is named", "[fmnist]") {
  CHECK(*parse_hidden("512,256") == std::vector<int>{512, 256});
  CHECK(parse_hidden("")->empty());
  CHECK(*parse_hidden("4096,4096") == std::vector<int>{4096, 4096});
  CHECK_THAT(parse_hidden("abc").error(), Catch::Contains("'abc' in 'abc' is not a layer width"));
  CHECK_THAT(parse_hidden("512,,2").error(), Catch::Contains("'' in '512,,2'"));
  CHECK_THAT(parse_hidden("0").error(), Catch::Contains("a layer of 0 units"));
  CHECK_THAT(parse_hidden("1,2,3,4,5,6,7,8,9").error(), Catch::Contains("at most 8"));
  CHECK(param_count({784, 512, 256, 10}) == 784 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10);
}

TEST_CASE("forward and backward equal a plain reference on a tiny batch", "[fmnist]") {
  std::vector<int> sizes = {7, 5, 4, 3};
  int rows = 6;
  auto c = devices::make_cpu_compute(1);
  mlp m(*c, sizes, 8);
  m.init(42);
  auto x = random_values(static_cast<size_t>(rows * 7), 1);
  std::vector<int32_t> labels = {0, 1, 2, 2, 1, 0};
  m.load_inputs(x.data(), labels.data(), rows);
  auto res = m.train_pass(1.0f);
  auto w = m.save();
  w.resize(m.params());
  auto want = reference(sizes, w, x, labels, rows);
  CHECK(res.loss_sum == Approx(want.loss).epsilon(1e-5));
  std::vector<float> g(m.params());
  c->download(g.data(), m.gradients(), g.size() * sizeof(float));
  double worst = 0;
  for (size_t k = 0; k < g.size(); ++k)
    worst = std::max(worst, std::abs(g[k] - want.grads[k]) / std::max(1.0, std::abs(want.grads[k])));
  CHECK(worst < 1e-5);
  // The layers are announced last first, each once.
  std::vector<int> order;
  m.train_pass(1.0f, [&](int l) { order.push_back(l); });
  CHECK(order == std::vector<int>{3, 2, 1});
}

TEST_CASE("gradients agree with finite differences of the loss", "[fmnist]") {
  std::vector<int> sizes = {6, 8, 4};
  int rows = 5;
  auto c = devices::make_cpu_compute(1);
  mlp m(*c, sizes, rows);
  m.init(7);
  auto x = random_values(static_cast<size_t>(rows * 6), 3);
  std::vector<int32_t> labels = {0, 3, 1, 2, 3};
  m.load_inputs(x.data(), labels.data(), rows);
  m.train_pass(1.0f);
  std::vector<float> g(m.params());
  c->download(g.data(), m.gradients(), g.size() * sizeof(float));
  auto state = m.save();
  size_t bad = 0, kinks = 0;
  for (size_t k = 0; k < m.params(); ++k) {
    auto probe = [&](float delta) {
      auto s = state;
      s[k] += delta;
      REQUIRE(m.restore(s));
      return m.evaluate_batch().loss_sum;
    };
    const float eps = 1e-2f;
    double up = probe(eps), mid = probe(0), down = probe(-eps);
    // A ReLU that switches within ±eps makes the loss bend there: the one-sided slopes
    // differ, and that parameter says nothing about the gradient's correctness.
    if (std::abs((up - mid) - (mid - down)) / eps > 1e-2) {
      ++kinks;
      continue;
    }
    double numeric = (up - down) / (2.0 * eps);
    bad += std::abs(numeric - g[k]) > 1e-3 + 1e-2 * std::abs(numeric);
  }
  INFO(kinks << " of " << m.params() << " parameters sit at a kink");
  CHECK(bad == 0);
  CHECK(kinks < m.params() / 10);
  REQUIRE(m.restore(state));
  CHECK_THAT(m.restore(std::vector<float>(3)).error(), Catch::Contains("another hidden="));
}

TEST_CASE("IDX files: read whole, and every kind of damage named", "[fmnist]") {
  temp_dir t;
  auto img = t.path + "/img.gz", lab = t.path + "/lab.gz";
  write_gz(img, idx_images(3));
  write_gz(lab, idx_labels(3));
  auto d = load_idx(img, lab);
  REQUIRE(d);
  CHECK(d->count == 3);
  CHECK(d->pixels == 784);
  CHECK(d->labels == std::vector<int32_t>{0, 1, 2});
  CHECK(d->images[785] == static_cast<uint8_t>(785 * 7));
  std::vector<float> x(2 * 784);
  std::vector<int32_t> l(2);
  uint32_t idx[2] = {2, 0};
  gather(*d, idx, 2, x.data(), l.data());
  CHECK(x[1] == Approx(static_cast<uint8_t>((2 * 784 + 1) * 7) / 255.0));
  CHECK(l == std::vector<int32_t>{2, 0});

  CHECK_THAT(load_idx(t.path + "/none.gz", lab).error(), Catch::Contains("none.gz: No such file"));
  write_gz(t.path + "/bad-magic.gz", idx_labels(3));
  CHECK_THAT(load_idx(t.path + "/bad-magic.gz", lab).error(), Catch::Contains("not an IDX image file"));
  write_gz(t.path + "/lab4.gz", idx_labels(4));
  CHECK_THAT(load_idx(img, t.path + "/lab4.gz").error(), Catch::Contains("holds 3 images but"));
  write_gz(t.path + "/big-label.gz", idx_labels(3, 12));
  CHECK_THAT(load_idx(img, t.path + "/big-label.gz").error(), Catch::Contains("label 12 of image 0"));
  auto short_images = idx_images(3);
  short_images.resize(short_images.size() - 10);
  write_gz(t.path + "/short.gz", short_images);
  CHECK_THAT(load_idx(t.path + "/short.gz", lab).error(), Catch::Contains("(truncated or padded)"));
  write_gz(t.path + "/small.gz", idx_images(3, 14, 14));
  CHECK_THAT(load_idx(t.path + "/small.gz", lab).error(), Catch::Contains("not 28×28"));
  // A gzip stream cut in the middle.
  {
    std::FILE* f = std::fopen(img.c_str(), "rb");
    std::vector<char> bytes(1 << 16);
    auto n = std::fread(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
    f = std::fopen((t.path + "/cut.gz").c_str(), "wb");
    std::fwrite(bytes.data(), 1, n / 2, f);
    std::fclose(f);
  }
  CHECK_THAT(load_idx(t.path + "/cut.gz", lab).error(), Catch::Contains("cut.gz"));
  CHECK_THAT(load_split(t.path + "/nowhere", "train").error(),
             Catch::Contains("install the Debian package dataset-fashion-mnist"));
}

TEST_CASE("an epoch's order is a permutation fixed by the seed and the epoch", "[fmnist]") {
  auto a = epoch_order(1000, 5, 0);
  CHECK(std::set<uint32_t>(a.begin(), a.end()).size() == 1000);
  CHECK(*std::max_element(a.begin(), a.end()) == 999);
  CHECK(epoch_order(1000, 5, 0) == a);
  CHECK(epoch_order(1000, 5, 1) != a);
  CHECK(epoch_order(1000, 6, 0) != a);
  // Fixed numbers: the same on every machine (splitmix64 and Fisher–Yates only).
  auto small = epoch_order(5, 1, 0);
  CHECK(std::set<uint32_t>(small.begin(), small.end()).size() == 5);
}

TEST_CASE("the real Fashion-MNIST: a small MLP learns it, deterministically", "[fmnist]") {
  // The set-up installs dataset-fashion-mnist; scripts/device-check carries it elsewhere.
  const char* dir = std::getenv("MONKEY_FMNIST_DATA") ? std::getenv("MONKEY_FMNIST_DATA")
                                                      : default_data_dir;
  auto train = load_split(dir, "train");
  REQUIRE_FALSE(!train);
  auto test = load_split(dir, "t10k");
  REQUIRE(test);
  CHECK(train->count == 60000);
  CHECK(test->count == 10000);
  auto run = [&] {
    auto c = devices::make_cpu_compute(1);
    mlp m(*c, {784, 64, 10}, 128);
    m.init(1);
    auto order = epoch_order(train->count, 1, 0);
    for (int s = 0; s * 128 < 20000; ++s) {
      m.load_batch(*train, order.data() + s * 128, 128);
      m.train_pass(1.0f / 128);
      m.sgd(0.1f, 0.9f, 0.0f);
    }
    return std::make_pair(m.evaluate(*test), m.save());
  };
  auto [score, weights] = run();
  INFO("test accuracy " << score.accuracy << ", loss " << score.loss);
  CHECK(score.accuracy > 0.75);
  CHECK(run().second == weights); // bit for bit
}
