// SPDX-License-Identifier: Apache-2.0
#include "runtime/dataplane/reduce.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace monkey;
using namespace monkey::dp;

namespace {

float as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

} // namespace

TEST_CASE("float16: every value survives the round trip, halfway cases round to even",
          "[runtime][dataplane][reduce]") {
  size_t bad = 0;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    auto f = f16_to_f32(static_cast<uint16_t>(h));
    auto back = f32_to_f16(f);
    if (std::isnan(f))
      bad += (back & 0x7c00) != 0x7c00 || (back & 0x3ff) == 0; // still a NaN
    else
      bad += back != h;
  }
  CHECK(bad == 0);
  // Between two neighbours (positive finite, subnormals included): the midpoint goes to the
  // even one, anything above it up, anything below it down.
  size_t wrong = 0;
  for (uint16_t h = 0; h < 0x7bff; ++h) {
    float lo = f16_to_f32(h), hi = f16_to_f32(static_cast<uint16_t>(h + 1));
    float mid = static_cast<float>((static_cast<double>(lo) + hi) / 2);
    wrong += f32_to_f16(mid) != ((h & 1) ? h + 1 : h);
    wrong += f32_to_f16(std::nextafter(mid, std::numeric_limits<float>::infinity())) != h + 1;
    wrong += f32_to_f16(std::nextafter(mid, 0.0f)) != h;
    wrong += f32_to_f16(-mid) != (((h & 1) ? h + 1 : h) | 0x8000);
  }
  CHECK(wrong == 0);
  CHECK(f32_to_f16(65504.0f) == 0x7bff);
  CHECK(f32_to_f16(std::nextafter(65520.0f, 0.0f)) == 0x7bff);
  CHECK(f32_to_f16(65520.0f) == 0x7c00); // rounds past the largest: infinity
  CHECK(f32_to_f16(1e30f) == 0x7c00);
  CHECK(f32_to_f16(-std::numeric_limits<float>::infinity()) == 0xfc00);
  CHECK(f32_to_f16(as_float(0x33000000)) == 0); // 2^-25: half the smallest subnormal, to even
  CHECK(f16_to_f32(0x0001) == std::ldexp(1.0f, -24));
}

TEST_CASE("bfloat16: every value survives the round trip, halfway cases round to even",
          "[runtime][dataplane][reduce]") {
  size_t bad = 0, wrong = 0;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    auto f = bf16_to_f32(static_cast<uint16_t>(h));
    auto back = f32_to_bf16(f);
    bad += std::isnan(f) ? !std::isnan(bf16_to_f32(back)) : back != h;
  }
  for (uint16_t h = 0; h < 0x7f7f; ++h) {
    float lo = bf16_to_f32(h), hi = bf16_to_f32(static_cast<uint16_t>(h + 1));
    float mid = static_cast<float>((static_cast<double>(lo) + hi) / 2);
    wrong += f32_to_bf16(mid) != ((h & 1) ? h + 1 : h);
    wrong += f32_to_bf16(std::nextafter(mid, std::numeric_limits<float>::infinity())) != h + 1;
    wrong += f32_to_bf16(std::nextafter(mid, 0.0f)) != h;
  }
  CHECK(bad == 0);
  CHECK(wrong == 0);
  CHECK(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
}

TEST_CASE("add_elems adds every reducible type element by element, integers wrap",
          "[runtime][dataplane][reduce]") {
  for (uint64_t n : {0ull, 1ull, 3ull, 4ull, 9ull, 1001ull}) {
    INFO("n = " << n);
    std::vector<float> fd(n), fs(n), fw(n);
    std::vector<double> dd(n), ds(n), dw(n);
    std::vector<int32_t> id(n), is(n), iw(n);
    std::vector<int64_t> ld(n), ls(n), lw(n);
    std::vector<uint16_t> bd(n), bs(n), bw(n), hd(n), hs(n), hw(n);
    for (uint64_t k = 0; k < n; ++k) {
      auto x = static_cast<double>(k) * 0.37 - 11.0, y = 1.0 / (static_cast<double>(k) + 0.5);
      fd[k] = static_cast<float>(x), fs[k] = static_cast<float>(y), fw[k] = fd[k] + fs[k];
      dd[k] = x, ds[k] = y, dw[k] = x + y;
      id[k] = static_cast<int32_t>(k * 7919) - 5000, is[k] = static_cast<int32_t>(k) * -3;
      iw[k] = id[k] + is[k];
      ld[k] = static_cast<int64_t>(k) << 40, ls[k] = -static_cast<int64_t>(k * k);
      lw[k] = ld[k] + ls[k];
      bd[k] = f32_to_bf16(fd[k]), bs[k] = f32_to_bf16(fs[k]);
      bw[k] = f32_to_bf16(bf16_to_f32(bd[k]) + bf16_to_f32(bs[k]));
      hd[k] = f32_to_f16(fd[k]), hs[k] = f32_to_f16(fs[k]);
      hw[k] = f32_to_f16(f16_to_f32(hd[k]) + f16_to_f32(hs[k]));
    }
    add_elems(dtype::f32, fd.data(), fs.data(), n);
    add_elems(dtype::f64, dd.data(), ds.data(), n);
    add_elems(dtype::i32, id.data(), is.data(), n);
    add_elems(dtype::i64, ld.data(), ls.data(), n);
    add_elems(dtype::bf16, bd.data(), bs.data(), n);
    add_elems(dtype::f16, hd.data(), hs.data(), n);
    CHECK(fd == fw);
    CHECK(dd == dw);
    CHECK(id == iw);
    CHECK(ld == lw);
    CHECK(bd == bw);
    CHECK(hd == hw);
  }
  int32_t a = std::numeric_limits<int32_t>::max(), b = 1;
  add_elems(dtype::i32, &a, &b, 1);
  CHECK(a == std::numeric_limits<int32_t>::min());
  double m[3] = {3, 6, -9};
  divide_elems(dtype::f64, m, 3, 3);
  CHECK((m[0] == 1 && m[1] == 2 && m[2] == -3));
  uint16_t h[2] = {f32_to_f16(6.0f), f32_to_bf16(6.0f)};
  divide_elems(dtype::f16, h, 1, 4);
  divide_elems(dtype::bf16, h + 1, 1, 4);
  CHECK(f16_to_f32(h[0]) == 1.5f);
  CHECK(bf16_to_f32(h[1]) == 1.5f);
}

TEST_CASE("which types reduce, and the errors that say so", "[runtime][dataplane][reduce]") {
  for (auto t : {dtype::f32, dtype::f64, dtype::bf16, dtype::f16})
    for (auto op : {reduce_op::sum, reduce_op::mean})
      CHECK(check_reducible(t, op, "allreduce"));
  for (auto t : {dtype::i32, dtype::i64}) {
    CHECK(check_reducible(t, reduce_op::sum, "allreduce"));
    auto mean = check_reducible(t, reduce_op::mean, "allreduce");
    REQUIRE_FALSE(mean);
    CHECK_THAT(mean.error(), Catch::Contains("the mean is defined for floating types only"));
  }
  auto u8 = check_reducible(dtype::u8, reduce_op::sum, "reduce_scatter");
  REQUIRE_FALSE(u8);
  CHECK_THAT(u8.error(), Catch::Contains("reduce_scatter reduces float32, float64"));
  CHECK_THAT(u8.error(), Catch::Contains("(the buffer holds uint8)"));
}
