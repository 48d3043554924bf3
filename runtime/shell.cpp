// SPDX-License-Identifier: Apache-2.0
#include "runtime/shell.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <sys/wait.h>

namespace monkey {

std::string shell_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool capture_output(const std::string& cmd, std::string& out, size_t limit) {
  out.clear();
  FILE* p = ::popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!p)
    return false;
  std::array<char, 65536> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0)
    if (out.size() < limit)
      out.append(buf.data(), std::min(n, limit - out.size()));
  int rc = ::pclose(p);
  return rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
}

} // namespace monkey
