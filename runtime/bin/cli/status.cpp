// SPDX-License-Identifier: Apache-2.0
// monkey status and monkey devices: the answering node, its resources and devices.
#include "runtime/bin/cli/cli.hpp"

#include <iostream>

namespace monkey::cli {

namespace {

int run_status(context& ctx, bool devices_only) {
  auto c = ctx.connect();
  if (!c)
    return fail(c.error());
  auto r = (*c)->call<status_reply>(verb::status, std::string{});
  if (!r)
    return fail(r.error());
  if (ctx.g.json) {
    if (devices_only)
      std::cout << to_json(*r)["devices"].dump() << "\n";
    else
      std::cout << to_json(*r).dump() << "\n";
    return 0;
  }
  if (devices_only) {
    std::printf("%-8s %-5s %-40s %6s %6s %10s %10s\n", "DEVICE", "KIND", "MODEL", "SLOTS",
                "FREE", "MEMORY_MB", "GFLOP/S");
    for (auto& d : r->devices)
      std::printf("%-8s %-5s %-40.40s %6d %6d %10lld %10s\n", d.name.c_str(), d.kind.c_str(),
                  d.model.c_str(), d.slots, d.free_slots, static_cast<long long>(d.memory_mb),
                  d.gflops > 0 ? std::to_string(static_cast<int>(d.gflops)).c_str() : "-");
    return 0;
  }
  // What this node has and runs; then one line on the cluster, so that neither passes for
  // the other (`monkey jobs` lists the cluster's jobs).
  auto n = (*c)->call<nodes_reply>(verb::nodes, std::string{});
  std::string name;
  if (n)
    for (auto& m : n->members)
      if (m.node == r->node)
        name = m.name;
  std::printf("this node: %s%s%s (incarnation %u) at %s, pid %d, up since %s%s\n",
              name.c_str(), name.empty() ? "" : " ", r->node.c_str(), r->incarnation,
              r->address.c_str(), r->pid, clock_time(r->started_ms).c_str(),
              r->accepting ? "" : " [shutting down]");
  std::printf("this node: cpus %d/%d free, gpus %d/%d free, memory %lld/%lld MB free\n",
              r->cpus_free,
              r->cpus_total, r->gpus_free, r->gpus_total, static_cast<long long>(r->mem_free_mb),
              static_cast<long long>(r->mem_total_mb));
  std::string counts;
  for (auto& [s, n] : r->jobs_by_state)
    counts += (counts.empty() ? "" : ", ") + s + " " + std::to_string(n);
  std::printf("this node: jobs it owns: %s\n", counts.empty() ? "none" : counts.c_str());
  if (r->tasks_queued > 0 || r->tasks_in_flight > 0)
    std::printf("this node: tasks %llu queued, %llu chunks on device proxies\n",
                static_cast<unsigned long long>(r->tasks_queued),
                static_cast<unsigned long long>(r->tasks_in_flight));
  if (n)
    std::printf("cluster:   %u agreed members, %u alive (monkey nodes); every job of the "
                "cluster: monkey jobs\n",
                n->agreed, n->agreed_alive);
  return 0;
}

} // namespace

verb_def add_status(CLI::App& app) {
  auto* s = app.add_subcommand("status", "the answering node (identity, resources, the jobs it "
                                         "owns) and the cluster's member count (--json: the "
                                         "node's table sizes too)");
  return {s, [](context& ctx) { return run_status(ctx, false); }};
}

verb_def add_devices(CLI::App& app) {
  auto* s = app.add_subcommand("devices", "the answering node's devices, slots and speed");
  return {s, [](context& ctx) { return run_status(ctx, true); }};
}

} // namespace monkey::cli
