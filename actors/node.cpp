// SPDX-License-Identifier: Apache-2.0
#include "actors/node.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <thread>

#include "actors/checkpoints.hpp"
#include "actors/device_proxy.hpp"
#include "actors/gateway/gateway.hpp"
#include "actors/journal_actor.hpp"
#include "actors/membership/membership.hpp"
#include "actors/router/router.hpp"
#include "actors/tasks/task_dispatch.hpp"
#include "runtime/wire/atoms.hpp"
#include "runtime/logging.hpp"
#include "runtime/net/net.hpp"
#include "runtime/supervision/supervisor.hpp"

namespace monkey {

namespace {

struct publish_state {
  std::string host;
  uint16_t port = 0;
  bool published = false;
};

} // namespace

caf::actor current_coordinator(caf::actor_system& sys, const caf::actor& root) {
  caf::scoped_actor self{sys};
  caf::actor out;
  self->request(root, std::chrono::seconds(10), atoms::which::value, std::string(coordinator_path))
    .receive([&](caf::actor& a) { out = std::move(a); }, [](caf::error&) {});
  return out;
}

namespace {

/// The address a published actor is reached at ("0.0.0.0" listens everywhere: 127.0.0.1).
std::string published_address(const publish_state& pub) {
  return (pub.host.empty() || pub.host == "0.0.0.0" ? std::string("127.0.0.1") : pub.host) + ":"
         + std::to_string(pub.port);
}

/// The core supervisor's children, in start order (rest_for_one: a restart restarts the
/// ones after it): journal, devices, tasks, coordinator, router, checkpoints.
std::vector<child_spec> core_children(const node_setup& setup,
                                      std::shared_ptr<publish_state> pub) {
  auto cfg = setup.coordinator;
  auto store = setup.store;
  auto launch = setup.launch;
  std::vector<child_spec> core;
  core.push_back({"journal",
                  [store](caf::actor_system& s, const sibling_map&) {
                    return spawn_journal(s, store);
                  },
                  restart_policy::permanent, false});
  auto devs = cfg.devices;
  core.push_back({"devices",
                  [devs](caf::actor_system& s, const sibling_map&) {
                    return spawn_device_supervisor(s, devs);
                  },
                  restart_policy::permanent, true, true});
  task_dispatch_config tc;
  tc.node = cfg.node;
  tc.task_chunk = setup.task_chunk;
  tc.retention_ms = cfg.retention_ms;
  for (auto& d : cfg.devices)
    tc.devices.push_back(d.name);
  core.push_back({"tasks",
                  [tc](caf::actor_system& s, const sibling_map& siblings) {
                    return spawn_task_dispatch(s, tc, siblings.at("journal"),
                                               siblings.at("devices"));
                  },
                  restart_policy::permanent, false});
  core.push_back({"coordinator",
                  [cfg, launch, pub](caf::actor_system& s, const sibling_map& siblings) {
                    auto c = cfg;
                    if (pub->published) // a restart: the node's address is known by now
                      c.address = published_address(*pub);
                    return spawn_coordinator(s, c, siblings.at("journal"), launch);
                  },
                  restart_policy::permanent, true});
  router_config rc;
  rc.node = cfg.node;
  rc.joining = !setup.seeds.empty();
  core.push_back({"router",
                  [rc](caf::actor_system& s, const sibling_map& siblings) {
                    return spawn_router(s, rc, siblings.at("coordinator"), siblings.at("tasks"));
                  },
                  restart_policy::permanent, false});
  auto ck = setup.checkpoints;
  if (ck.root.empty()) // a node started without one (tests): beside the journal
    ck.root = cfg.data_dir + "/checkpoints";
  if (ck.node.empty())
    ck.node = cfg.node.str();
  core.push_back({"checkpoints",
                  [ck](caf::actor_system& s, const sibling_map&) {
                    return spawn_checkpoints(s, ck);
                  },
                  restart_policy::permanent, false});
  return core;
}

/// The membership actor's child spec: it advertises --advertise or the bound address.
child_spec membership_child(const node_setup& setup, std::shared_ptr<publish_state> pub) {
  auto& cfg = setup.coordinator;
  membership_config mc;
  mc.self.node = cfg.node.str();
  mc.self.incarnation = static_cast<uint64_t>(cfg.incarnation) << 32;
  mc.self.pid = cfg.pid;
  mc.self.cpus = cfg.total.cpus;
  mc.self.gpus = cfg.total.gpus;
  for (auto& d : cfg.devices)
    mc.self.devices += (mc.self.devices.empty() ? "" : ",") + d.name;
  mc.self.tags = cfg.total.tags;
  mc.self.apps = cfg.apps;
  mc.self.reason = "started";
  mc.self.since_ms = now_ms();
  mc.secret = setup.secret;
  mc.seeds = setup.seeds;
  mc.suspicion_timeout = setup.suspicion_timeout;
  auto advertise = setup.advertise;
  auto name = setup.name;
  return {"membership",
          [mc, pub, advertise, name](caf::actor_system& s, const sibling_map&) {
            auto c = mc;
            c.self.address = !advertise.empty() ? advertise : published_address(*pub);
            c.self.name = !name.empty() ? name : default_node_name(c.self.address);
            return spawn_membership(s, c);
          },
          restart_policy::permanent, false};
}

/// Waits until the front has found the gateway: the node answers from then on.
bool front_ready(caf::actor_system& sys, const caf::actor& front) {
  caf::scoped_actor self{sys};
  for (int i = 0; i < 200; ++i) {
    bool ready = false;
    self->request(front, std::chrono::seconds(5), atoms::which::value)
      .receive([&](bool found) { ready = found; }, [&](caf::error&) {});
    if (ready)
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

} // namespace

expected<node_handles> start_node(caf::actor_system& sys, node_setup setup) {
  auto pub = std::make_shared<publish_state>();
  pub->host = setup.host;
  pub->port = setup.port;
  auto secret = setup.secret;
  auto node = setup.coordinator.node.str();

  // The front is published first and once, for the node's whole life: it finds the gateway
  // under the root supervisor by itself, so a restarted gateway needs no new publish, and
  // the bound port is known before the actors that advertise it start.
  auto front = spawn_front(sys);
  auto bound = publish_actor(front, pub->port, pub->host);
  if (!bound) {
    caf::anon_send_exit(front, caf::exit_reason::user_shutdown);
    return failure{"cannot listen on " + setup.host + ":" + std::to_string(setup.port) + ": "
                   + caf::to_string(bound.error())};
  }
  pub->port = *bound;
  pub->published = true;

  auto core = core_children(setup, pub);
  std::vector<child_spec> top;
  top.push_back({"core",
                 [core](caf::actor_system& s, const sibling_map&) {
                   return spawn_supervisor(s, "core",
                                           {restart_strategy::rest_for_one, 5,
                                            std::chrono::seconds(10)},
                                           core);
                 },
                 restart_policy::permanent, true, true});
  top.push_back({"gateway",
                 [secret, node](caf::actor_system& s, const sibling_map&) {
                   return spawn_gateway(s, secret, node);
                 },
                 restart_policy::permanent, false});
  top.push_back(membership_child(setup, pub));
  auto root = spawn_supervisor(sys, "node",
                               {restart_strategy::one_for_one, 5, std::chrono::seconds(10)},
                               std::move(top));
  sys.registry().put(caf::atom_from_string(root_supervisor_name), root);
  caf::anon_send(front, atoms::subscribe::value, root); // it stops with the root
  if (!front_ready(sys, front)) {
    caf::anon_send_exit(root, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(front, caf::exit_reason::user_shutdown);
    return failure{"the gateway did not start"};
  }
  return node_handles{root, front, pub->port};
}

} // namespace monkey
