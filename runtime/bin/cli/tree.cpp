// SPDX-License-Identifier: Apache-2.0
// monkey tree and monkey kill ACTOR: the node's supervision tree, and fault injection.
#include "runtime/bin/cli/cli.hpp"

#include "runtime/supervision/supervisor.hpp"

namespace monkey::cli {

verb_def add_tree(CLI::App& app) {
  auto* s = app.add_subcommand("tree", "the node's live supervision tree with restart counts");
  return {s, [](context& ctx) {
            auto c = ctx.connect();
            if (!c)
              return fail(c.error());
            auto body = (*c)->call(verb::tree, std::string{});
            if (!body)
              return fail("tree: " + body.error());
            auto t = decode<tree_node>(*body, "tree");
            if (!t)
              return fail("tree: " + t.error());
            std::fputs(render_tree(*t).c_str(), stdout);
            return 0;
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
