// SPDX-License-Identifier: Apache-2.0
// The verbs that run without a node: monkey up, monkey down, monkey certs.
#include "runtime/bin/cli/cli.hpp"

#include <sys/stat.h>

#include "runtime/bin/cli/up.hpp"
#include "runtime/net/certs.hpp"

namespace monkey::cli {

verb_def add_up(CLI::App& app) {
  auto o = std::make_shared<up_options>();
  auto* s = app.add_subcommand("up", "start a local cluster of N nodes under MONKEY_HOME "
                                     "(monkey up N [OPTIONS] [-- RUNTIME OPTIONS...])");
  s->add_option("N", o->nodes, "number of nodes")->capture_default_str();
  s->add_option("--cpus", o->cpus, "CPUs per node (default: the host's split evenly)");
  s->add_option("--timeout", o->timeout_s, "seconds until every node must see all alive")
    ->capture_default_str();
  s->add_flag("--no-measure", o->no_measure, "skip measuring device speed");
  s->add_flag("--tls", o->tls, "TLS between nodes and clients; certificates from "
                               "MONKEY_HOME/certs (created when missing)");
  s->add_option("--restart", o->restart,
                "start node NAME (n1, n2, ...) of the cluster again, on its data directory and "
                "with its options, after it was killed or stopped");
  verb_def v{s, [o](context& ctx) {
               auto opt = *o;
               opt.runtime_args = ctx.command;
               opt.json = ctx.g.json;
               opt.secret_file = ctx.g.secret_file;
               return cluster_up(opt);
             },
             true, false};
  return v;
}

verb_def add_down(CLI::App& app) {
  auto grace = std::make_shared<double>(30);
  auto* s = app.add_subcommand("down", "stop the local cluster started by `monkey up` (also "
                                       "nodes restarted since, by `up --restart` or by hand)");
  s->add_option("--grace", *grace, "seconds before SIGKILL")->capture_default_str();
  return {s, [grace](context&) { return cluster_down(*grace); }, false, false};
}

verb_def add_certs(CLI::App& app) {
  auto o = std::make_shared<certs_options>();
  auto* s = app.add_subcommand("certs", "create a cluster CA and certificates for nodes and "
                                        "clients (TLS, --tls)");
  s->add_option("--dir", o->dir, "certificate folder (default MONKEY_HOME/certs)");
  s->add_option("--name", o->names, "certificate to issue (repeatable; default: node and client)");
  s->add_option("--days", o->days, "validity of issued certificates")->capture_default_str();
  s->add_flag("--force", o->force, "reissue certificates that exist (the CA is kept)");
  return {s,
          [o](context&) {
            auto opt = *o;
            if (opt.dir.empty())
              opt.dir = monkey_home() + "/certs";
            if (opt.names.empty())
              opt.names = {"node", "client"};
            ::mkdir(monkey_home().c_str(), 0700);
            auto made = make_certs(opt);
            if (!made)
              return fail(made.error());
            if (made->created_ca)
              std::printf("created a new cluster CA in %s (keep ca.key private; copy ca.pem to "
                          "every node)\n",
                          opt.dir.c_str());
            for (auto& w : made->written)
              std::printf("wrote %s\n", w.c_str());
            for (auto& k : made->kept)
              std::printf("kept  %s (exists; --force reissues it)\n", k.c_str());
            std::printf("start nodes with: monkey-runtime --tls --tls-dir %s [--tls-name NAME]\n"
                        "clients use:      monkey --tls-dir %s ... (or MONKEY_TLS_DIR)\n",
                        opt.dir.c_str(), opt.dir.c_str());
            return 0;
          },
          false, false};
}

} // namespace monkey::cli
