// SPDX-License-Identifier: Apache-2.0
#pragma once
// The apps a node can run: the `monkey-app-*` executables in its --app-dir, each asked for
// its description (`--describe`, a few seconds at most) and hashed (its build: SHA-256 of
// the file, 16 hex digits), once at start. Plain C++: no CAF; catalog.test.cpp.

#include <string>
#include <vector>

#include "runtime/membership.hpp"

namespace monkey {

struct found_app {
  app_entry entry;  ///< name, build, schema (what the node gossips)
  std::string path; ///< the executable
};

struct app_scan {
  std::vector<found_app> apps;
  std::vector<std::string> problems; ///< "monkey-app-x: --describe exited 1" (logged)
};

/// Scans `dir` (missing: no apps, no problem).
app_scan scan_app_dir(const std::string& dir);

/// SHA-256 of the file's bytes, first 16 hex digits; "" when it cannot be read.
std::string file_build_hash(const std::string& path);

} // namespace monkey
