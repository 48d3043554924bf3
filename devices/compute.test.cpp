// SPDX-License-Identifier: Apache-2.0
#include "devices/compute.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

using namespace monkey::devices;

namespace {

std::vector<float> random_values(size_t n, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 g(seed);
  std::vector<float> v(n);
  for (auto& x : v)
    x = lo + (hi - lo) * static_cast<float>(g() >> 8) / static_cast<float>(1 << 24);
  return v;
}

/// Plain row-major GEMM in double: the reference.
std::vector<float> ref_gemm(bool ta, bool tb, int m, int n, int k, float alpha,
                            const std::vector<float>& a, const std::vector<float>& b, float beta,
                            std::vector<float> c) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int p = 0; p < k; ++p) {
        double x = ta ? a[static_cast<size_t>(p) * m + i] : a[static_cast<size_t>(i) * k + p];
        double y = tb ? b[static_cast<size_t>(j) * k + p] : b[static_cast<size_t>(p) * n + j];
        s += x * y;
      }
      auto& out = c[static_cast<size_t>(i) * n + j];
      out = static_cast<float>(alpha * s + beta * out);
    }
  return c;
}

/// Runs `op` on device memory holding `in`, returns what is there after it.
template <class Op>
std::vector<float> on_device(compute& c, std::vector<float> in, Op op) {
  device_array<float> d(c, in.size());
  d.upload(in.data(), in.size());
  op(d.get());
  d.download(in.data(), in.size());
  return in;
}

double max_rel_error(const std::vector<float>& got, const std::vector<float>& want) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i])
                              / std::max(1.0, std::abs(static_cast<double>(want[i]))));
  return worst;
}

/// Every kernel of `c` against the plain reference (`tol`: GEMM's relative error).
void check_kernels(compute& c, double tol) {
  { // "gemm, every transposition, beta 0 and not, odd sizes"
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (auto [m, n, k] : {std::tuple{1, 1, 1}, std::tuple{7, 5, 3}, std::tuple{33, 17, 65},
                               std::tuple{64, 10, 784}})
          for (float beta : {0.0f, 0.5f}) {
            auto a = random_values(static_cast<size_t>(m) * k, 1);
            auto b = random_values(static_cast<size_t>(k) * n, 2);
            auto c0 = random_values(static_cast<size_t>(m) * n, 3);
            auto want = ref_gemm(ta, tb, m, n, k, 0.75f, a, b, beta, c0);
            device_array<float> da(c, a.size()), db(c, b.size());
            da.upload(a.data(), a.size());
            db.upload(b.data(), b.size());
            auto got = on_device(c, c0, [&](float* dc) {
              c.gemm(ta, tb, m, n, k, 0.75f, da.get(), db.get(), beta, dc);
            });
            INFO("ta " << ta << " tb " << tb << " m " << m << " n " << n << " k " << k);
            CHECK(max_rel_error(got, want) < tol);
          }
  }
  { // "bias add and its gradient (column sums in row order)"
    int rows = 37, cols = 11;
    auto y = random_values(static_cast<size_t>(rows) * cols, 4);
    auto b = random_values(static_cast<size_t>(cols), 5);
    auto want = y;
    std::vector<float> colsum(static_cast<size_t>(cols), 0.0f);
    for (int r = 0; r < rows; ++r)
      for (int j = 0; j < cols; ++j) {
        want[static_cast<size_t>(r) * cols + j] += b[static_cast<size_t>(j)];
        colsum[static_cast<size_t>(j)] += y[static_cast<size_t>(r) * cols + j];
      }
    device_array<float> db(c, b.size());
    db.upload(b.data(), b.size());
    CHECK(on_device(c, y, [&](float* dy) { c.bias_add(dy, db.get(), rows, cols); }) == want);
    device_array<float> dy(c, y.size());
    dy.upload(y.data(), y.size());
    CHECK(on_device(c, std::vector<float>(static_cast<size_t>(cols), 9.0f),
                    [&](float* out) { c.bias_grad(dy.get(), out, rows, cols); })
          == colsum);
  }
  { // "relu and its gradient"
    auto y = random_values(1001, 6);
    y[3] = 0.0f;
    auto relu = y;
    for (auto& v : relu)
      v = v > 0 ? v : 0;
    CHECK(on_device(c, y, [&](float* d) { c.relu(d, y.size()); }) == relu);
    auto g = random_values(1001, 7);
    auto want = g;
    for (size_t i = 0; i < g.size(); ++i)
      if (!(relu[i] > 0))
        want[i] = 0;
    device_array<float> dr(c, relu.size());
    dr.upload(relu.data(), relu.size());
    CHECK(on_device(c, g, [&](float* d) { c.relu_grad(dr.get(), d, g.size()); }) == want);
  }
  { // "softmax cross-entropy: loss, correct count and gradient"
    int rows = 9, cols = 10;
    auto z = random_values(static_cast<size_t>(rows) * cols, 8, -6, 6);
    std::vector<int32_t> labels;
    for (int r = 0; r < rows; ++r)
      labels.push_back((r * 7) % cols);
    double loss = 0;
    int64_t correct = 0;
    std::vector<float> grad(z.size());
    for (int r = 0; r < rows; ++r) {
      const float* row = z.data() + static_cast<size_t>(r) * cols;
      double mx = row[0], sum = 0;
      int best = 0;
      for (int j = 1; j < cols; ++j)
        if (row[j] > mx)
          mx = row[j], best = j;
      for (int j = 0; j < cols; ++j)
        sum += std::exp(row[j] - mx);
      loss += -(row[labels[static_cast<size_t>(r)]] - mx - std::log(sum));
      correct += best == labels[static_cast<size_t>(r)];
      for (int j = 0; j < cols; ++j)
        grad[static_cast<size_t>(r) * cols + j] =
          static_cast<float>((std::exp(row[j] - mx) / sum - (j == labels[static_cast<size_t>(r)])) * 0.5);
    }
    device_array<float> dz(c, z.size());
    dz.upload(z.data(), z.size());
    device_array<int32_t> dl(c, labels.size());
    dl.upload(labels.data(), labels.size());
    xent_result res;
    auto got = on_device(c, std::vector<float>(z.size()), [&](float* d) {
      res = c.softmax_xent(dz.get(), dl.get(), rows, cols, 0.5f, d);
    });
    CHECK(res.loss_sum == Approx(loss).epsilon(1e-6));
    CHECK(res.correct == correct);
    CHECK(max_rel_error(got, grad) < 1e-6);
    // Without a gradient: the same loss.
    CHECK(c.softmax_xent(dz.get(), dl.get(), rows, cols, 1.0f, nullptr).loss_sum
          == Approx(loss).epsilon(1e-6));
  }
  { // "sgd with momentum and weight decay, and the vector operations"
    size_t n = 517;
    auto w = random_values(n, 9), v = random_values(n, 10), g = random_values(n, 11);
    auto ww = w, vv = v;
    for (size_t i = 0; i < n; ++i) {
      vv[i] = 0.9f * vv[i] + (g[i] + 0.01f * ww[i]);
      ww[i] = ww[i] - 0.1f * vv[i];
    }
    device_array<float> dv(c, n), dg(c, n);
    dv.upload(v.data(), n);
    dg.upload(g.data(), n);
    CHECK(on_device(c, w, [&](float* dw) { c.sgd(dw, dv.get(), dg.get(), n, 0.1f, 0.9f, 0.01f); })
          == ww);
    std::vector<float> back(n);
    dv.download(back.data(), n);
    CHECK(back == vv);
    auto axpy = w;
    for (size_t i = 0; i < n; ++i)
      axpy[i] = 2.5f * g[i] + w[i];
    CHECK(on_device(c, w, [&](float* d) { c.axpy(2.5f, dg.get(), d, n); }) == axpy);
    auto scaled = w;
    for (auto& x : scaled)
      x = -0.5f * x;
    CHECK(on_device(c, w, [&](float* d) { c.scale(-0.5f, d, n); }) == scaled);
    CHECK(on_device(c, w, [&](float* d) { c.copy(dg.get(), d, n); }) == g);
    CHECK(on_device(c, w, [&](float* d) { c.fill(d, 3.0f, n); }) == std::vector<float>(n, 3.0f));
  }
}

} // namespace

TEST_CASE("CPU kernels equal a plain reference", "[devices][compute]") {
  for (int threads : {1, 2}) {
    auto c = make_cpu_compute(threads);
    CHECK_FALSE(c->gpu());
    check_kernels(*c, 1e-5);
  }
}

TEST_CASE("CPU GEMM is deterministic for a thread count", "[devices][compute]") {
  auto c = make_cpu_compute(2);
  int m = 256, n = 512, k = 784;
  auto a = random_values(static_cast<size_t>(m) * k, 12), b = random_values(static_cast<size_t>(k) * n, 13);
  device_array<float> da(*c, a.size()), db(*c, b.size());
  da.upload(a.data(), a.size());
  db.upload(b.data(), b.size());
  auto run = [&] {
    return on_device(*c, std::vector<float>(static_cast<size_t>(m) * n), [&](float* d) {
      c->gemm(false, false, m, n, k, 1.0f, da.get(), db.get(), 0.0f, d);
    });
  };
  auto first = run();
  for (int i = 0; i < 3; ++i)
    CHECK(run() == first);
}

TEST_CASE("CUDA kernels equal the reference on a GPU, or say why they cannot run",
          "[devices][compute][cuda]") {
  std::string why;
  auto g = make_cuda_compute(0, &why);
  if (!g) {
    CHECK_FALSE(why.empty());
    std::printf("MONKEY-SKIPPED: the CUDA kernels cannot run here (%s)\n", why.c_str());
    return;
  }
  CHECK(g->gpu());
  check_kernels(*g, 1e-5);
  std::string none;
  CHECK(make_cuda_compute(999, &none) == nullptr);
  CHECK_THAT(none, Catch::Contains("no CUDA device 999"));
}
