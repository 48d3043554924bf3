// SPDX-License-Identifier: Apache-2.0
#pragma once
// What every fuzz harness defines: the libFuzzer entry point, and the seeds it starts from
// (valid inputs, written into tests/fuzz/corpus/<harness>/ by `fuzz_<harness> --seeds DIR`).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

std::vector<std::string> monkey_fuzz_seeds();
