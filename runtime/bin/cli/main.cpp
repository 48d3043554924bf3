// SPDX-License-Identifier: Apache-2.0
// monkey: the command line of a Monkey cluster. Every verb is a CLI11 subcommand defined
// in its own file (cli.hpp lists them); this file parses and dispatches. Errors go to
// stderr; --json on every listing verb; the console runs each line through run_cli.

#include <algorithm>
#include <cstdio>

#include "monkey/sdk/version.hpp"
#include "runtime/bin/cli/cli.hpp"
#include "runtime/net/auth.hpp"

namespace monkey::cli {

expected<client*> context::connect() {
  if (shared)
    return shared;
  if (own)
    return own.get();
  auto key = find_client_key(g.token_file, g.secret_file);
  if (!key)
    return failure{key.error()};
  auto timeout = std::chrono::milliseconds(static_cast<int64_t>(g.timeout_s * 1000));
  auto tls = find_tls_files(g.tls_dir);
  // `--address n2`: a node's name (no ':'), looked up in the member list of whichever
  // node of the cluster answers first.
  bool by_name = !g.address.empty() && g.address.find(':') == std::string::npos
                 && g.address.find(',') == std::string::npos;
  auto c = client::connect(find_addresses(by_name ? std::string{} : g.address),
                           credentials{*key}, tls, timeout);
  if (!c)
    return failure{by_name ? "--address " + g.address + ": no node answered to look the name up ("
                               + c.error() + ")"
                           : c.error()};
  if (by_name) {
    auto n = (*c)->call<nodes_reply>(verb::nodes, std::string{});
    if (!n)
      return failure{"--address " + g.address + ": " + n.error()};
    auto hit = one_member(n->members, g.address);
    if (!hit) {
      auto why = hit.error();
      return failure{"--address " + g.address + ": " + why.insert(why.size() - 1,
                                                                   "; or give HOST:PORT")};
    }
    if ((*hit)->node != n->self) {
      auto address = (*hit)->address;
      auto state = (*hit)->state;
      c = client::connect({address}, credentials{*key}, tls, timeout);
      if (!c)
        return failure{"--address " + g.address + " (" + address + ", " + to_string(state)
                       + "): " + c.error()};
    }
  }
  own = std::move(*c);
  return own.get();
}

expected<client*> context::reconnect(const std::vector<std::string>& addresses) {
  if (shared)
    return failure{"the console's connection to " + shared->address() + " is lost"};
  auto key = find_client_key(g.token_file, g.secret_file);
  if (!key)
    return failure{key.error()};
  auto timeout = std::chrono::milliseconds(static_cast<int64_t>(g.timeout_s * 1000));
  auto c = client::connect(addresses, credentials{*key}, find_tls_files(g.tls_dir), timeout);
  if (!c)
    return failure{c.error()};
  if (own)
    retired.push_back(std::move(own));
  own = std::move(*c);
  return own.get();
}

expected<const member*> one_member(const std::vector<member>& members, const std::string& name) {
  auto hits = find_members(members, name);
  if (hits.size() == 1)
    return hits[0];
  std::string names;
  for (auto& m : members)
    names += (names.empty() ? "" : ", ") + (m.name.empty() ? m.node : m.name);
  return failure{std::string(hits.empty() ? "no node of that name" : "ambiguous") + " (nodes: "
                 + names + ")"};
}

namespace {

/// Edit distance, for "did you mean".
size_t distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t prev = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cur = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] == b[j - 1] ? 0 : 1)});
      prev = cur;
    }
  }
  return row[b.size()];
}

/// The closest of `names` to `word`, if it is close enough to be a typo.
std::string nearest(const std::string& word, const std::vector<std::string>& names) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (auto& n : names) {
    auto d = distance(word, n);
    if (d < best_d) {
      best_d = d;
      best = n;
    }
  }
  return best_d <= std::max<size_t>(2, word.size() / 3) ? best : std::string{};
}

/// A sentence for the parse errors a newcomer makes (an unknown verb, an unknown flag, a
/// command without "--"); empty: CLI11's own message will do.
std::string explain_parse_error(CLI::App& app, const std::vector<verb_def>& verbs,
                                const CLI::ParseError& e) {
  const verb_def* given = nullptr;
  for (auto& v : verbs)
    if (v.sub->parsed())
      given = &v;
  if (!given) {
    if (app.remaining().empty())
      return {};
    auto word = app.remaining().front();
    std::vector<std::string> names;
    for (auto& v : verbs)
      names.push_back(v.sub->get_name());
    std::string all;
    for (auto& n : names)
      all += (all.empty() ? "" : ", ") + n;
    if (!word.empty() && word[0] == '-')
      return "unknown option '" + word + "' (global options: --address, --token-file, "
             + "--secret-file, --tls-dir, --timeout, --json; see --help)";
    auto guess = nearest(word, names);
    return "unknown command '" + word + "'" + (guess.empty() ? "" : ": did you mean " + guess + "?")
           + " (commands: " + all + ")";
  }
  if (!dynamic_cast<const CLI::ExtrasError*>(&e))
    return {};
  auto extras = given->sub->remaining();
  if (extras.empty())
    extras = app.remaining();
  if (extras.empty())
    return {};
  auto verb = given->sub->get_name();
  for (auto& x : extras) {
    if (x.size() < 2 || x[0] != '-')
      continue;
    std::vector<std::string> flags;
    for (auto* a : {given->sub, &app})
      for (auto* o : a->get_options())
        for (auto& n : o->get_lnames())
          flags.push_back("--" + n);
    auto name = x.substr(0, x.find('='));
    auto guess = nearest(name, flags);
    return verb + ": unknown option '" + name + "'"
           + (guess.empty() ? "" : ": did you mean " + guess + "?") + " (see monkey " + verb
           + " --help)";
  }
  if (given->takes_command)
    return verb + ": unexpected '" + extras.front() + "': put the command after '--', e.g. "
           + "monkey " + verb + " --cpus 2 -- " + extras.front() + " ...";
  return verb + ": unexpected argument '" + extras.front() + "' (see monkey " + verb + " --help)";
}

} // namespace

int run_cli(int argc, char** argv, client* shared) {
  // Everything after the first "--" is the job's command (or the runtime options of `up`),
  // untouched by option parsing.
  context ctx;
  ctx.shared = shared;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      for (int j = i + 1; j < argc; ++j)
        ctx.command.push_back(argv[j]);
      break;
    }
    args.push_back(argv[i]);
  }
  CLI::App app{"monkey: run and watch jobs on a Monkey cluster"};
  app.set_version_flag("--version", "monkey " MONKEY_VERSION);
  app.require_subcommand(1);
  app.fallthrough(true); // the global options also after the verb
  auto& g = ctx.g;
  app.add_option("--address", g.address,
                 "node HOST:PORT, or several comma-separated (else MONKEY_ADDRESS, the cluster "
                 "file, localhost:4700)");
  app.add_option("--token-file", g.token_file,
                 "client token (else MONKEY_TOKEN_FILE, MONKEY_HOME/token)");
  app.add_option("--secret-file", g.secret_file,
                 "cluster secret to derive the client token from (else MONKEY_SECRET_FILE, "
                 "MONKEY_HOME/secret)");
  app.add_option("--tls-dir", g.tls_dir,
                 "connect with TLS using DIR/client.pem, client.key, ca.pem (else "
                 "MONKEY_TLS_DIR, MONKEY_HOME/cluster.tls)");
  app.add_option("--timeout", g.timeout_s,
                 "seconds to connect to one node before the next address is tried (default 5; "
                 "else MONKEY_TIMEOUT)");
  app.add_flag("--json", g.json, "machine-readable output");
  if (auto* t = std::getenv("MONKEY_TIMEOUT"); t && *t)
    g.timeout_s = std::atof(t);
  std::vector<verb_def> verbs{add_submit(app),  add_jobs(app),   add_status(app),
                              add_show(app),    add_logs(app),   add_cancel(app),
                              add_why(app),     add_devices(app), add_nodes(app),
                              add_drain(app),   add_tree(app),   add_kill(app),
                              add_tasks(app),   add_up(app),     add_down(app),
                              add_certs(app),   add_console(app), add_rm(app),
                              add_checkpoints(app), add_sweep(app),
                              add_reproduce(app), add_metrics(app)};
  if (args.size() == 1 && ctx.command.empty()) {
    // No verb at all: what there is to type, not just "a subcommand is required".
    std::fputs(app.help().c_str(), stderr);
    return exit_usage;
  }
  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError& e) {
    if (auto msg = explain_parse_error(app, verbs, e); !msg.empty())
      return fail(msg, exit_usage);
    int code = app.exit(e); // prints help, or the error on stderr
    return code == 0 ? 0 : exit_usage;
  }
  if (g.timeout_s <= 0)
    return fail("--timeout: must be more than 0 seconds", exit_usage);
  for (auto& v : verbs) {
    if (!v.sub->parsed())
      continue;
    if (!ctx.command.empty() && !v.takes_command)
      return fail("'--' and a command only go with submit (and runtime options with up)",
                  exit_usage);
    return v.run(ctx);
  }
  return fail("no command given (see --help)", exit_usage);
}

} // namespace monkey::cli

int main(int argc, char** argv) {
  return monkey::cli::run_cli(argc, argv, nullptr);
}
