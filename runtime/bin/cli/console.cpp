// SPDX-License-Identifier: Apache-2.0
#include "runtime/bin/cli/console.hpp"

#include <cstdio>
#include <cstring>
#include <unistd.h>

#include <editline/readline.h>

#include "runtime/net/auth.hpp"
#include "runtime/bin/cli/cli.hpp"
#include "runtime/supervision/supervisor.hpp"

namespace monkey {

namespace {

/// The verbs that run over the console's connection (the banner, `help` and completion list
/// these; `up`, `down`, `certs` act on this machine and `console` is refused here).
const char* const verbs[] = {"submit", "jobs",  "status", "show",  "logs", "cancel", "why",
                             "devices", "nodes", "drain", "tree", "kill", "tasks", "rm",
                             "checkpoints", "sweep", "reproduce", "metrics", nullptr};
/// The console's own words.
const char* const own_words[] = {"help", "exit", "quit", nullptr};

/// "submit jobs … tasks": the verbs, space-separated.
std::string verb_list() {
  std::string out;
  for (auto* v = verbs; *v; ++v)
    out += (out.empty() ? "" : " ") + std::string(*v);
  return out;
}

/// What `help` prints (`help VERB` runs `VERB --help` instead).
void print_help() {
  std::printf("commands: %s\n"
              "  COMMAND --help (or help COMMAND) shows its options; --json works on listings\n"
              "  help; exit, quit or Ctrl-D leaves the console\n"
              "  (up, down and certs are not console commands: run them with monkey in a shell)\n",
              verb_list().c_str());
  std::fflush(stdout);
}

client* completion_client = nullptr;
std::vector<std::string> completion_words;

void collect_paths(const tree_node& n, const std::string& prefix, std::vector<std::string>& out) {
  for (auto& c : n.children) {
    auto path = prefix.empty() ? c.name : prefix + "/" + c.name;
    out.push_back(path);
    collect_paths(c, path, out);
  }
}

char* generator(const char* text, int state) {
  static size_t index;
  if (state == 0)
    index = 0;
  size_t len = std::strlen(text);
  while (index < completion_words.size()) {
    auto& w = completion_words[index++];
    if (w.compare(0, len, text) == 0)
      return ::strdup(w.c_str());
  }
  return nullptr;
}

char** complete(const char* text, int start, int /*end*/) {
  completion_words.clear();
  std::string before(rl_line_buffer, static_cast<size_t>(start));
  auto words = split_words(before);
  if (start == 0 || !words || words->empty()) {
    for (auto* list : {verbs, own_words})
      for (auto* v = list; *v; ++v)
        completion_words.emplace_back(*v);
  } else if ((*words)[0] == "kill" && completion_client) {
    // Actor paths from the live tree.
    if (auto body = completion_client->call(verb::tree, std::string{}, std::chrono::seconds(3)))
      if (auto t = decode<tree_node>(*body, "tree"))
        collect_paths(*t, "", completion_words);
  } else if (completion_client) {
    // Job ids (short form) for the verbs that take one.
    static const char* const takes_id[] = {"show", "logs", "cancel", "why", "checkpoints",
                                           "reproduce", "metrics"};
    for (auto* v : takes_id)
      if ((*words)[0] == v)
        if (auto r = completion_client->call<list_reply>(verb::list, list_request{"", 200}))
          for (auto& j : r->jobs)
            completion_words.push_back(j.id.short_str());
  }
  rl_attempted_completion_over = 1;
  return rl_completion_matches(text, generator);
}

expected<std::unique_ptr<client>> connect(const console_options& opt) {
  if (opt.connector)
    return opt.connector();
  auto key = find_client_key(opt.token_file, opt.secret_file);
  if (!key)
    return failure{key.error()};
  return client::connect(find_addresses(opt.address), credentials{*key},
                         find_tls_files(opt.tls_dir), opt.timeout);
}

int run_line(const std::string& line, cli_function run, client* c) {
  auto words = split_words(line);
  if (!words) {
    std::fprintf(stderr, "monkey: %s\n", words.error().c_str());
    return 2;
  }
  std::vector<std::string> args{"monkey"};
  args.insert(args.end(), words->begin(), words->end());
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  int rc = run(static_cast<int>(args.size()), argv.data(), c);
  std::fflush(stdout);
  std::fflush(stderr);
  return rc;
}

} // namespace

expected<std::vector<std::string>> split_words(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (c == '\'') {
      auto end = line.find('\'', i + 1);
      if (end == std::string::npos)
        return failure{"unterminated ' quote"};
      cur += line.substr(i + 1, end - i - 1);
      i = end;
      in_word = true;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < line.size() && line[j] != '"'; ++j) {
        if (line[j] == '\\' && j + 1 < line.size())
          ++j;
        cur += line[j];
      }
      if (j >= line.size())
        return failure{"unterminated \" quote"};
      i = j;
      in_word = true;
    } else if (c == '\\' && i + 1 < line.size()) {
      cur += line[++i];
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (in_word)
        out.push_back(cur);
      cur.clear();
      in_word = false;
    } else {
      cur += c;
      in_word = true;
    }
  }
  if (in_word)
    out.push_back(cur);
  return out;
}

int run_console(const console_options& opt, cli_function run) {
  auto conn = connect(opt);
  if (!conn) {
    std::fprintf(stderr, "monkey: %s\n", conn.error().c_str());
    return 1;
  }
  std::unique_ptr<client> c = std::move(*conn);
  if (!opt.command.empty())
    return run_line(opt.command, run, c.get());
  auto history = monkey_home() + "/console_history";
  ::using_history();
  ::stifle_history(1000);
  ::read_history(history.c_str());
  completion_client = c.get();
  rl_attempted_completion_function = complete;
  rl_completion_append_character = ' ';
  std::printf("monkey console on %s — commands: %s; help; exit, quit or Ctrl-D\n",
              c->address().c_str(), verb_list().c_str());
  std::fflush(stdout);
  for (;;) {
    char* raw = ::readline("monkey> ");
    if (!raw)
      break;
    std::string line = raw;
    std::free(raw);
    auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos)
      continue;
    ::add_history(line.c_str());
    ::write_history(history.c_str());
    auto words = split_words(line);
    if (words && !words->empty() && ((*words)[0] == "exit" || (*words)[0] == "quit"))
      break;
    if (words && !words->empty() && (*words)[0] == "help") {
      if (words->size() > 1)
        run_line((*words)[1] + " --help", run, c.get());
      else
        print_help();
      continue;
    }
    if (words && !words->empty() && (*words)[0] == "console") {
      std::fprintf(stderr, "monkey: already in the console\n");
      continue;
    }
    int rc = run_line(line, run, c.get());
    if (rc != 0) {
      // A lost connection (the node restarted its gateway, say): connect again.
      if (!c->call(verb::status, std::string{}, std::chrono::seconds(3))) {
        if (auto again = connect(opt)) {
          c = std::move(*again);
          completion_client = c.get();
          std::fprintf(stderr, "monkey: reconnected to %s\n", c->address().c_str());
        }
      }
    }
  }
  std::printf("\n");
  return 0;
}

namespace cli {

verb_def add_console(CLI::App& app) {
  auto command = std::make_shared<std::string>();
  auto* s = app.add_subcommand("console", "interactive console: line editing, history, "
                                          "completion; every verb without the word monkey");
  s->add_option("-c", *command, "run this one command over the console's connection and exit "
                                "with its exit code");
  return {s,
          [command](context& ctx) {
            if (ctx.shared)
              return fail("already in the console");
            console_options opt;
            opt.address = ctx.g.address;
            opt.secret_file = ctx.g.secret_file;
            opt.token_file = ctx.g.token_file;
            opt.tls_dir = ctx.g.tls_dir;
            opt.timeout = std::chrono::milliseconds(static_cast<int64_t>(ctx.g.timeout_s * 1000));
            opt.command = *command;
            opt.connector = [g = ctx.g]() -> expected<std::unique_ptr<client>> {
              context fresh;
              fresh.g = g;
              if (auto c = fresh.connect(); !c)
                return failure{c.error()};
              return std::move(fresh.own);
            };
            return run_console(opt, &run_cli);
          },
          false, false};
}

} // namespace cli

} // namespace monkey
