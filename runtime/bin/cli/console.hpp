// SPDX-License-Identifier: Apache-2.0
#pragma once
// `monkey console`: a REPL on a running node with line editing, history and tab
// completion (libedit). Each line is one `monkey` command run over the console's single
// authenticated connection; `-c CMD` runs one command and exits with its code.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/client/client.hpp"
#include "runtime/expected.hpp"

namespace monkey {

struct console_options {
  std::string address;
  std::string secret_file;
  std::string token_file;
  std::string tls_dir;
  std::chrono::milliseconds timeout{5000}; ///< to connect to one node
  std::string command; ///< -c: run this and exit
  /// Opens the connection (and opens it again after a lost one): the CLI's own, so that
  /// `--address` takes a node's name as every verb does. Unset: the first of `address`.
  std::function<expected<std::unique_ptr<client>>()> connector;
};

using cli_function = int (*)(int argc, char** argv, client* shared);

int run_console(const console_options& opt, cli_function run);

/// Splits a command line into words: whitespace separates; '...' is literal; "..." and
/// backslash escape. An unterminated quote is a failure.
expected<std::vector<std::string>> split_words(const std::string& line);

} // namespace monkey
