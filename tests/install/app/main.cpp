// SPDX-License-Identifier: Apache-2.0
// Prints what the SDK reads from a job's environment (or why it cannot).
#include <cstdio>

#include <monkey/sdk/attempt.hpp>
#include <monkey/sdk/version.hpp>

int main() {
  monkey::sdk::context_error err;
  auto ctx = monkey::sdk::current_attempt(&err);
  if (!ctx) {
    std::fprintf(stderr, "hello: %s\n", err.what.c_str());
    return 2;
  }
  std::printf("monkey %s: job %s attempt %d lr %s\n", MONKEY_VERSION, ctx->job_id.c_str(),
              ctx->attempt, ctx->param("lr").value_or("-").c_str());
  return 0;
}
