// SPDX-License-Identifier: Apache-2.0
#pragma once
// Running a shell command for its output (git, in provenance and shipping). Plain C++.

#include <cstddef>
#include <string>

namespace monkey {

/// `s` in single quotes as a POSIX shell reads it back.
std::string shell_quoted(const std::string& s);

/// The output of shell command `cmd` (its stderr dropped), at most `limit` bytes of it;
/// whether it exited 0.
bool capture_output(const std::string& cmd, std::string& out, size_t limit = static_cast<size_t>(-1));

} // namespace monkey
