// SPDX-License-Identifier: Apache-2.0
// Fuzzes the job-spec parser (YAML and JSON, runtime/spec_parser.hpp) and the checks on
// what it produces: a spec file is user input.
#include "tests/fuzz/fuzz.hpp"

#include "runtime/spec_parser.hpp"

using namespace monkey;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto spec = parse_spec_text(text, "fuzz.yaml");
  if (spec && validate(*spec)) {
    (void)substitute_params(*spec);
    if (!spec->array.empty())
      (void)expand_array(spec->array);
  }
  (void)parse_duration_s(text);
  (void)parse_memory_mb(text);
  (void)parse_dependency(text);
  return 0;
}

std::vector<std::string> monkey_fuzz_seeds() {
  return {
    "name: train\ncommand: [python3, train.py, --lr, \"{lr}\"]\nparams: {lr: 0.1}\n"
    "resources: {cpus: 2, gpus: 1, mem: 4G}\nretries: 3\ntimeout: 2h\narray: 0-9\n",
    "{\"command\": [\"true\"], \"after\": [\"ok:01ARZ3NDEKTSV4RRFFQ69G5FAV\"], \"env\": {\"A\": \"1\"}}",
    "command: echo hi\n",
    "command: [sh, -c, \"echo {x}\"]\nparams: {x: [1, 2]}\n",
    "90s", "512M", "any:01ARZ3NDEKTSV4RRFFQ69G5FAV",
  };
}
