// SPDX-License-Identifier: Apache-2.0
// Submits N trivial jobs (/bin/true) one after the other over one connection and prints
// one JSON line: {"jobs": N, "seconds": S, "per_second": R, "p50_ms": .., "p99_ms": ..}
// (the latency of each acknowledged submit). Each submit is acknowledged
// only when the job's record is durable on its holders (R of them), so this measures the
// submit path: entry node -> owner -> journal -> replicas -> ack.
//   submit_client N          (node and secret found as by `monkey`)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <vector>

#include "runtime/net/auth.hpp"
#include "runtime/client/client.hpp"
#include "runtime/wire/messages/client.hpp"

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
  std::vector<double> ms;
  ms.reserve(static_cast<size_t>(n));
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    auto s0 = std::chrono::steady_clock::now();
    submit_request req;
    req.spec.command = {"/bin/true"};
    req.spec.name = "bench-" + std::to_string(i);
    req.client_key = "bench-" + std::to_string(i) + "-" + std::to_string(::getpid());
    auto r = (*c)->call<submit_reply>(verb::submit, req);
    if (!r) {
      std::fprintf(stderr, "submit_client: submit %d: %s\n", i, r.error().c_str());
      return 1;
    }
    ms.push_back(
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s0).count());
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double q) {
    return ms.empty() ? 0.0 : ms[std::min(ms.size() - 1, static_cast<size_t>(q * ms.size()))];
  };
  std::printf("{\"jobs\": %d, \"seconds\": %.4f, \"per_second\": %.1f, \"p50_ms\": %.2f, "
              "\"p99_ms\": %.2f}\n",
              n, s, n / s, pct(0.50), pct(0.99));
  return 0;
}
