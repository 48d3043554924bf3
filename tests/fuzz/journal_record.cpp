// SPDX-License-Identifier: Apache-2.0
// Fuzzes the decoding of what the journal stores (job records and task batches, msgpack
// blobs) and of metric lines from job output: a decoded record encodes and decodes back to
// the same bytes.
#include "tests/fuzz/fuzz.hpp"

#include <cstdlib>

#include "runtime/job.hpp"
#include "runtime/tasks.hpp"

using namespace monkey;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string blob(reinterpret_cast<const char*>(data), size);
  if (auto rec = decode<job_record>(blob, "fuzz")) {
    auto again = encode(*rec);
    auto back = decode<job_record>(again, "fuzz");
    if (!back || encode(*back) != again)
      std::abort(); // a record that does not survive its own round trip
  }
  (void)decode<task_batch>(blob, "fuzz");
  std::vector<std::pair<std::string, double>> metrics;
  (void)parse_metric_line(blob, metrics);
  return 0;
}

std::vector<std::string> monkey_fuzz_seeds() {
  job_record rec;
  rec.id = job_id::generate();
  rec.owner = node_id{42};
  rec.spec.command = {"sleep", "1"};
  rec.state = job_state::succeeded;
  rec.version = (1u << 20) + 3;
  rec.replicas = {"0000000000000001", "0000000000000002"};
  attempt_record at;
  at.id = attempt_id{node_id{42}, 3, 9};
  at.number = 1;
  at.outcome = "succeeded";
  at.cause = "exit 0";
  rec.attempts.push_back(at);
  task_batch b;
  b.id = job_id::generate();
  b.kind = "noop";
  b.count = 100;
  return {encode(rec), encode(b), "MONKEY_METRIC step=10 loss=0.31 acc=0.9"};
}
