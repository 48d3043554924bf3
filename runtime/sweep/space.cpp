// SPDX-License-Identifier: Apache-2.0
#include "runtime/sweep/space.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace monkey::sweep {

uint64_t rng::next() { // splitmix64
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double rng::uniform() {
  return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0);
}

size_t rng::below(size_t n) {
  if (n <= 1)
    return 0;
  // Rejection keeps every index equally likely.
  uint64_t limit = ~uint64_t{0} - (~uint64_t{0} % n);
  uint64_t x;
  do
    x = next();
  while (x >= limit);
  return static_cast<size_t>(x % n);
}

std::string value_text(double v) {
  char buf[40];
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v)
      break;
  }
  return buf;
}

bool active(const param_space& p, const assignment& before) {
  for (auto& [other, values] : p.when) {
    auto it = before.find(other);
    if (it == before.end() || std::find(values.begin(), values.end(), it->second) == values.end())
      return false;
  }
  return true;
}

double rounded(const param_space& p, double v) {
  if (p.type == dist::integer)
    return std::clamp(std::round(v), p.low, p.high);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return std::clamp(std::strtod(buf, nullptr), p.low, p.high);
}

namespace {

std::string short_text(double v, const param_space& p) {
  return value_text(rounded(p, v));
}

} // namespace

std::string draw(const param_space& p, rng& g) {
  switch (p.type) {
    case dist::uniform:
      return short_text(p.low + (p.high - p.low) * g.uniform(), p);
    case dist::loguniform:
      return short_text(std::exp(std::log(p.low) + (std::log(p.high) - std::log(p.low)) * g.uniform()), p);
    case dist::integer: {
      auto lo = static_cast<int64_t>(p.low), hi = static_cast<int64_t>(p.high);
      return std::to_string(lo + static_cast<int64_t>(g.below(static_cast<size_t>(hi - lo + 1))));
    }
    case dist::choice:
    case dist::grid:
      return p.values[g.below(p.values.size())];
  }
  return "";
}

assignment sample(const std::vector<param_space>& space, rng& g) {
  assignment a;
  for (auto& p : space)
    if (active(p, a))
      a[p.name] = draw(p, g);
  return a;
}

expected<std::vector<assignment>> grid_points(const std::vector<param_space>& space, size_t limit) {
  std::vector<assignment> points{assignment{}};
  for (auto& p : space) {
    if (p.type != dist::grid && p.type != dist::choice)
      return failure{"space." + p.name + ": a grid needs values; this parameter is "
                     + to_string(p.type)};
    std::vector<assignment> next;
    double total = 0;
    for (auto& a : points)
      total += active(p, a) ? static_cast<double>(p.values.size()) : 1.0;
    if (total > static_cast<double>(limit))
      return failure{"the grid has more than " + std::to_string(limit) + " points (at least "
                     + value_text(total) + ")"};
    for (auto& a : points) {
      if (!active(p, a)) {
        next.push_back(a);
        continue;
      }
      for (auto& v : p.values) {
        auto b = a;
        b[p.name] = v;
        next.push_back(std::move(b));
      }
    }
    points = std::move(next);
  }
  return points;
}

std::vector<std::string> fill(const std::vector<std::string>& command, const assignment& a,
                              const std::vector<std::string>& names) {
  std::vector<std::string> out;
  out.reserve(command.size());
  for (auto& arg : command) {
    std::string s;
    for (size_t at = 0; at < arg.size();) {
      auto open = arg.find('{', at);
      auto close = open == std::string::npos ? std::string::npos : arg.find('}', open);
      if (close == std::string::npos) {
        s += arg.substr(at);
        break;
      }
      s += arg.substr(at, open - at);
      auto name = arg.substr(open + 1, close - open - 1);
      if (std::find(names.begin(), names.end(), name) == names.end()) {
        s += '{'; // not a placeholder: kept as written
        at = open + 1;
        continue;
      }
      if (auto it = a.find(name); it != a.end())
        s += it->second;
      at = close + 1;
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string assignment_text(const assignment& a) {
  std::string out;
  for (auto& [k, v] : a)
    out += (out.empty() ? "" : " ") + k + "=" + v;
  return out;
}

} // namespace monkey::sweep
