// SPDX-License-Identifier: Apache-2.0
// Submits N trivial jobs (/bin/true) one after the other over one connection and prints
// one JSON line: {"jobs": N, "seconds": S, "per_second": R}. Each submit is acknowledged
// only when the job's record is durable on its holders (R of them), so this measures the
// submit path: entry node -> owner -> journal -> replicas -> ack.
//   submit_client N          (node and secret found as by `monkey`)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

#include "runtime/auth.hpp"
#include "runtime/client.hpp"
#include "runtime/messages/client.hpp"

using namespace monkey;

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 200;
  auto secret = find_client_key("", "");
  if (!secret) {
    std::fprintf(stderr, "submit_client: %s\n", secret.error().c_str());
    return 1;
  }
  auto c = client::connect(find_addresses(""), credentials{*secret});
  if (!c) {
    std::fprintf(stderr, "submit_client: %s\n", c.error().c_str());
    return 1;
  }
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    submit_request req;
    req.spec.command = {"/bin/true"};
    req.spec.name = "bench-" + std::to_string(i);
    req.client_key = "bench-" + std::to_string(i) + "-" + std::to_string(::getpid());
    auto r = (*c)->call<submit_reply>(verb::submit, req);
    if (!r) {
      std::fprintf(stderr, "submit_client: submit %d: %s\n", i, r.error().c_str());
      return 1;
    }
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("{\"jobs\": %d, \"seconds\": %.4f, \"per_second\": %.1f}\n", n, s, n / s);
  return 0;
}
