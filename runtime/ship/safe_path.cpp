// SPDX-License-Identifier: Apache-2.0
// ship::safe_path on its own: job records check their bundles' paths with it (runtime/job.cpp),
// and the records build without the rest of the bundle code (monkey::codec).
#include "runtime/ship/bundle.hpp"

namespace monkey::ship {

bool safe_path(const std::string& rel) {
  if (rel.empty() || rel.front() == '/' || rel.back() == '/'
      || rel.find('\0') != std::string::npos)
    return false;
  size_t start = 0;
  while (start <= rel.size()) {
    auto slash = rel.find('/', start);
    auto part = rel.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part.empty() || part == "." || part == "..")
      return false;
    if (slash == std::string::npos)
      break;
    start = slash + 1;
  }
  return true;
}

} // namespace monkey::ship
