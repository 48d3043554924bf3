// SPDX-License-Identifier: Apache-2.0
// One client that submits TOTAL no-op tasks in batches of BATCH over one connection, then
// waits for every batch to be final and durable. Prints one JSON line:
//   {"tasks":..., "batches":..., "client_s":..., "server_s":..., "submit_s":...}
// client_s: first submit until the last batch is known final, seen by the client;
// server_s: first accept until the last final record is durable, by the node's clock.
//   tasks_client TOTAL BATCH [KIND]     (node and secret found as by `monkey`)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/net/auth.hpp"
#include "runtime/client/client.hpp"
#include "runtime/wire/messages/client.hpp"

using namespace monkey;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: tasks_client TOTAL BATCH [KIND]\n");
    return 2;
  }
  uint64_t total = std::strtoull(argv[1], nullptr, 10);
  uint64_t batch = std::strtoull(argv[2], nullptr, 10);
  std::string kind = argc > 3 ? argv[3] : "noop";
  if (total == 0 || batch == 0) {
    std::fprintf(stderr, "tasks_client: TOTAL and BATCH must be positive\n");
    return 2;
  }
  auto secret = find_client_key("", "");
  if (!secret) {
    std::fprintf(stderr, "tasks_client: %s\n", secret.error().c_str());
    return 1;
  }
  auto c = client::connect(find_addresses(""), credentials{*secret});
  if (!c) {
    std::fprintf(stderr, "tasks_client: %s\n", c.error().c_str());
    return 1;
  }
  std::vector<job_id> ids;
  auto t0 = std::chrono::steady_clock::now();
  for (uint64_t sent = 0; sent < total; sent += batch) {
    submit_tasks_request req;
    req.kind = kind;
    req.count = std::min(batch, total - sent);
    auto r = (*c)->call<submit_tasks_reply>(verb::submit_tasks, req);
    if (!r) {
      std::fprintf(stderr, "tasks_client: submit: %s\n", r.error().c_str());
      return 1;
    }
    ids.push_back(r->id);
  }
  auto t_submitted = std::chrono::steady_clock::now();
  int64_t first_ms = INT64_MAX, last_ms = 0;
  uint64_t ok = 0;
  for (auto& id : ids) {
    for (;;) {
      auto s = (*c)->call<task_batch_status>(verb::wait_tasks, wait_tasks_request{id.str(), 30000},
                                             std::chrono::seconds(60));
      if (!s) {
        std::fprintf(stderr, "tasks_client: wait: %s\n", s.error().c_str());
        return 1;
      }
      if (s->finished_ms == 0)
        continue;
      first_ms = std::min(first_ms, s->submitted_ms);
      last_ms = std::max(last_ms, s->finished_ms);
      ok += s->succeeded;
      break;
    }
  }
  auto t1 = std::chrono::steady_clock::now();
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  std::printf("{\"tasks\": %llu, \"succeeded\": %llu, \"batches\": %zu, \"client_s\": %.4f, "
              "\"submit_s\": %.4f, \"server_s\": %.4f}\n",
              static_cast<unsigned long long>(total), static_cast<unsigned long long>(ok),
              ids.size(), secs(t0, t1), secs(t0, t_submitted),
              static_cast<double>(last_ms - first_ms) / 1000.0);
  return ok == total ? 0 : 1;
}
