// SPDX-License-Identifier: Apache-2.0
#pragma once
// Supervision on CAF monitors (CAF 0.17 has none built in), after Erlang/OTP: strategies
// one_for_one, one_for_all and rest_for_one; restart intensity (at most N restarts in T,
// else stop every child in reverse order and fail, so the parent escalates); child specs
// with permanent / transient / temporary restart; children start in order and stop in
// reverse order. The tree is data (`tree_node`), built from the live actors.
//
// Messages a supervisor answers:
//   (tree)                 → std::string: msgpack tree_node of itself and its children
//   (kill, std::string p)  → std::string: kills child at path "a/b" (the supervisor of
//                            that child restarts it), or error(not_found)
//   (which, std::string p) → caf::actor: the current handle of the child at path "a/b",
//                            or error(not_found)
// A child spec marked `answers_tree` is asked for (tree) too (e.g. the coordinator lists
// its workers). States of a node: docs/supervision.md.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "runtime/wire/codec.hpp"

namespace monkey {

enum class restart_strategy : uint8_t { one_for_one, one_for_all, rest_for_one };
enum class restart_policy : uint8_t {
  permanent, ///< always restarted
  transient, ///< restarted only after an abnormal exit
  temporary, ///< never restarted
};

const char* to_string(restart_strategy s);

/// The children started before this one, by name: how a child finds its siblings.
using sibling_map = std::map<std::string, caf::actor>;

struct child_spec {
  std::string name;
  std::function<caf::actor(caf::actor_system&, const sibling_map&)> start;
  restart_policy restart = restart_policy::permanent;
  bool answers_tree = false; ///< a supervisor, or an actor that lists its own children
  bool supervisor = false;   ///< killed as a subtree: told to stop its children first
};

struct supervisor_flags {
  restart_strategy strategy = restart_strategy::one_for_one;
  size_t intensity = 3;                  ///< at most this many restarts ...
  std::chrono::milliseconds period{5000}; ///< ... within this period
};

struct tree_node {
  std::string name;
  std::string kind;  ///< "supervisor (one_for_one)", "actor", "worker", ...
  uint64_t id = 0;   ///< CAF actor id
  uint32_t restarts = 0;
  std::string state; ///< "running", "stopped"
  std::vector<tree_node> children;
  MSGPACK_DEFINE_MAP(name, kind, id, restarts, state, children);
};

/// Renders a tree with box-drawing lines, one actor per line.
std::string render_tree(const tree_node& root);

caf::actor spawn_supervisor(caf::actor_system& sys, std::string name, supervisor_flags flags,
                            std::vector<child_spec> children);

/// Registers `self` under `name` in the actor system's registry, replacing whatever is
/// there. CAF 0.17's `registry().put` keeps an existing entry, and never removes the entry
/// of an actor that ended: a restarted actor that only put itself would leave its dead
/// predecessor registered, and every lookup by name would reach that one.
void register_as(caf::actor_system& sys, const char* name, const caf::strong_actor_ptr& self);

} // namespace monkey
