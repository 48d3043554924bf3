// SPDX-License-Identifier: Apache-2.0
// monkey tree and monkey kill ACTOR: the node's supervision tree, and fault injection.
#include "runtime/bin/cli/cli.hpp"

#include "runtime/supervision/supervisor.hpp"

namespace monkey::cli {

namespace {

int print_tree(client& c) {
  auto body = c.call(verb::tree, std::string{});
  if (!body)
    return fail("tree: " + body.error());
  auto t = decode<tree_node>(*body, "tree");
  if (!t)
    return fail("tree: " + t.error());
  std::fputs(render_tree(*t).c_str(), stdout);
  return 0;
}

/// `tree NODE`: the member named so (a name, a node id or its unique prefix), asked over a
/// connection of its own (the console's goes to one node).
int tree_of(context& ctx, const std::string& node) {
  auto c = ctx.connect();
  if (!c)
    return fail(c.error());
  auto n = (*c)->call<nodes_reply>(verb::nodes, std::string{});
  if (!n)
    return fail("tree: " + n.error());
  auto hit = one_member(n->members, node);
  if (!hit)
    return fail("tree: " + node + ": " + hit.error());
  if ((*hit)->node == n->self)
    return print_tree(**c);
  context other;
  other.g = ctx.g;
  other.g.address = (*hit)->address;
  auto oc = other.connect();
  if (!oc)
    return fail("tree: " + node + " (" + (*hit)->address + ", " + to_string((*hit)->state)
                + "): " + oc.error());
  return print_tree(**oc);
}

} // namespace

verb_def add_tree(CLI::App& app) {
  auto node = std::make_shared<std::string>();
  auto* s = app.add_subcommand("tree", "a node's live supervision tree with restart counts "
                                       "(the answering node's, or NODE's)");
  s->add_option("NODE", *node, "a member's name or node id (monkey nodes)");
  return {s, [node](context& ctx) {
            if (!node->empty())
              return tree_of(ctx, *node);
            auto c = ctx.connect();
            if (!c)
              return fail(c.error());
            return print_tree(**c);
          }};
}

verb_def add_kill(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto* s = app.add_subcommand("kill", "kill an actor by path; its supervisor restarts it");
  s->add_option("ACTOR", *path, "path as shown by tree, e.g. core/coordinator")->required();
  return {s, [path](context& ctx) {
            auto c = ctx.connect();
            if (!c)
              return fail(c.error());
            auto body = (*c)->call(verb::kill_actor, encode(*path));
            if (!body)
              return fail("kill: " + body.error());
            std::printf("%s\n", body->c_str()); // plain text
            return 0;
          }};
}

} // namespace monkey::cli
