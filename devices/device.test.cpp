// SPDX-License-Identifier: Apache-2.0
#include "devices/device.hpp"

#include <catch2/catch.hpp>
#include <unistd.h>

using namespace monkey::devices;

TEST_CASE("the CPU is discovered with its cores and memory", "[devices]") {
  auto cpu = discover_cpu();
  CHECK(cpu.kind == "cpu");
  CHECK(cpu.slots == static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  CHECK(cpu.memory_mb > 0);
  CHECK_FALSE(cpu.model.empty());
}

TEST_CASE("GPU discovery never fails and says why it found none", "[devices]") {
  std::string why;
  auto gpus = discover_gpus(&why);
  if (gpus.empty())
    CHECK_FALSE(why.empty());
  for (auto& g : gpus)
    CHECK(g.kind == "cuda");
}
