// SPDX-License-Identifier: Apache-2.0
// monkey nodes and monkey drain NODE: the members, and a planned leave.
#include "runtime/bin/cli/cli.hpp"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <thread>

#include "runtime/sweep/drive.hpp"

namespace monkey::cli {

namespace {

int run_nodes(context& ctx) {
  auto c = ctx.connect();
  if (!c)
    return fail(c.error());
  auto r = (*c)->call<nodes_reply>(verb::nodes, std::string{});
  if (!r)
    return fail("nodes: " + r.error());
  if (ctx.g.json) {
    json out = json::array();
    for (auto& m : r->members) {
      json apps = json::array();
      for (auto& a : m.apps)
        apps.push_back({{"name", a.name}, {"build", a.build}});
      out.push_back({{"node", m.node},
                     {"name", m.name},
                     {"address", m.address},
                     {"pid", m.pid},
                     {"incarnation", incarnation_text(m.incarnation)},
                     {"state", to_string(m.state)},
                     {"since_ms", m.since_ms},
                     {"reason", m.reason},
                     {"cpus", m.cpus},
                     {"gpus", m.gpus},
                     {"devices", m.devices},
                     {"apps", apps},
                     {"self", m.node == r->self}});
    }
    std::cout << out.dump() << "\n";
    return 0;
  }
  std::printf("%-10s %-17s %-22s %8s %6s %-8s %-20s %-10s %s\n", "NAME", "NODE", "ADDRESS",
              "PID", "INC", "STATE", "SINCE", "DEVICES", "REASON");
  for (auto& m : r->members)
    std::printf("%-10s %-17s %-22s %8d %6s %-8s %-20s %-10s %s\n",
                (m.name.empty() ? "-" : m.name).c_str(),
                (m.node + (m.node == r->self ? "*" : "")).c_str(), m.address.c_str(), m.pid,
                incarnation_text(m.incarnation).c_str(), to_string(m.state),
                clock_time(m.since_ms).c_str(), m.devices.c_str(), m.reason.c_str());
  std::map<std::string, std::vector<std::string>> apps; // "hello (build)" → node names
  for (auto& m : r->members)
    if (m.state == member_state::alive)
      for (auto& a : m.apps)
        apps[a.name + " (" + a.build + ")"].push_back(m.name.empty() ? m.node : m.name);
  for (auto& [app, on] : apps) {
    std::string where;
    for (auto& n : on)
      where += (where.empty() ? "" : ", ") + n;
    std::printf("app %s on %s\n", app.c_str(), where.c_str());
  }
  std::printf("agreed member list: %u, of which alive: %u (%s)\n", r->agreed, r->agreed_alive,
              r->agreed_alive * 2 > r->agreed ? "a majority: this node starts attempts"
                                              : "no majority: this node starts no attempts and "
                                                "refuses submissions");
  return 0;
}

struct drain_options {
  std::string node;
  bool wait = false;
};

int run_drain(context& ctx, const drain_options& o) {
  auto c = ctx.connect();
  if (!c)
    return fail(c.error());
  // The majority rule stands, but a drain that leaves the cluster without one is said first.
  if (auto n = (*c)->call<nodes_reply>(verb::nodes, std::string{})) {
    auto hits = find_members(n->members, o.node);
    if (hits.size() == 1 && hits[0]->state == member_state::alive)
      if (auto w = leave_warning(n->members, n->agreed, {hits[0]->node}); !w.empty())
        std::fprintf(stderr, "monkey: warning: %s\n", w.c_str());
  }
  auto r = (*c)->call<text_reply>(verb::drain, id_request{o.node, false});
  if (!r)
    return fail("drain: " + r.error());
  std::printf("%s\n", r->text.c_str());
  if (!o.wait)
    return 0;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    // The node we asked may be the one leaving: ask whichever node answers.
    context again;
    again.g = ctx.g;
    auto other = again.connect();
    if (!other)
      continue;
    auto n = (*other)->call<nodes_reply>(verb::nodes, std::string{});
    if (!n)
      continue;
    for (auto* m : find_members(n->members, o.node))
      if (m->state == member_state::left || m->state == member_state::dead) {
        std::printf("node %s has %s the cluster\n", node_label(n->members, m->node).c_str(),
                    m->state == member_state::left ? "left" : "died and left");
        return m->state == member_state::left ? 0 : 1;
      }
  }
}

} // namespace

expected<std::vector<std::pair<int64_t, double>>> metric_series(client& c, const std::string& id,
                                                                const std::string& key) {
  id_request req{id};
  req.metric = key;
  auto r = c.call<show_reply>(verb::show, req);
  if (!r)
    return failure{"show " + id + ": " + r.error()};
  return metric_series(*r);
}

std::vector<std::pair<int64_t, double>> metric_series(const show_reply& r) {
  return sweep::newest_series(r);
}

std::map<std::string, std::string> node_names(context& ctx) {
  std::map<std::string, std::string> out;
  auto c = ctx.connect();
  if (!c)
    return out;
  if (auto n = (*c)->call<nodes_reply>(verb::nodes, std::string{}))
    for (auto& m : n->members)
      if (!m.name.empty())
        out[m.node] = m.name;
  return out;
}

std::string name_of(const std::map<std::string, std::string>& names, const std::string& node) {
  auto it = names.find(node);
  return it == names.end() ? node : it->second;
}

verb_def add_nodes(CLI::App& app) {
  auto* s = app.add_subcommand("nodes", "the members of the cluster as the answering node sees them");
  return {s, [](context& ctx) { return run_nodes(ctx); }};
}

verb_def add_drain(CLI::App& app) {
  auto o = std::make_shared<drain_options>();
  auto* s = app.add_subcommand("drain", "planned leave of a node: its queued jobs go to other "
                                        "nodes now, its running ones finish, then it leaves");
  s->add_option("NODE", o->node,
                "node name (see monkey nodes), id (or a prefix of 4+ characters) or HOST:PORT")
    ->required();
  s->add_flag("--wait", o->wait, "wait until the node has left");
  return {s, [o](context& ctx) { return run_drain(ctx, *o); }};
}

} // namespace monkey::cli
