// SPDX-License-Identifier: Apache-2.0
#pragma once
// Reading YAML documents (job specs, sweep files) with errors that name the place:
// `file:line:col: field: problem`. Internal to the runtime library (yaml-cpp is a private
// dependency): include it from .cpp files only.

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "runtime/expected.hpp"

namespace monkey::yaml {

struct spec_error {
  std::string text;
};

class reader {
public:
  explicit reader(std::string origin) : origin_(std::move(origin)) {}

  [[noreturn]] void fail(const YAML::Node& n, const std::string& field,
                         const std::string& problem) const {
    auto m = n.Mark();
    std::ostringstream out;
    out << origin_;
    if (m.line >= 0)
      out << ':' << (m.line + 1) << ':' << (m.column + 1);
    out << ": " << field << ": " << problem;
    throw spec_error{out.str()};
  }

  std::string scalar(const YAML::Node& n, const std::string& field) const {
    if (!n.IsScalar())
      fail(n, field, std::string("expected a single value, got a ") + kind(n));
    return n.Scalar();
  }

  int64_t integer(const YAML::Node& n, const std::string& field, int64_t lo, int64_t hi) const {
    auto s = scalar(n, field);
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || errno == ERANGE)
      fail(n, field, "expected an integer, got '" + s + "'");
    if (v < lo || v > hi)
      fail(n, field, "must be between " + std::to_string(lo) + " and " + std::to_string(hi)
                       + ", got " + s);
    return v;
  }

  std::vector<std::string> string_list(const YAML::Node& n, const std::string& field) const {
    if (!n.IsSequence())
      fail(n, field, std::string("expected a list, got a ") + kind(n));
    std::vector<std::string> out;
    for (size_t i = 0; i < n.size(); ++i)
      out.push_back(scalar(n[i], field + "[" + std::to_string(i) + "]"));
    return out;
  }

  double number(const YAML::Node& n, const std::string& field) const {
    auto s = scalar(n, field);
    char* end = nullptr;
    errno = 0;
    double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || errno == ERANGE || v != v)
      fail(n, field, "expected a number, got '" + s + "'");
    return v;
  }

  std::map<std::string, std::string> string_map(const YAML::Node& n,
                                                const std::string& field) const {
    if (!n.IsMap())
      fail(n, field, std::string("expected a mapping, got a ") + kind(n));
    std::map<std::string, std::string> out;
    for (auto it = n.begin(); it != n.end(); ++it) {
      auto key = scalar(it->first, field);
      out[key] = scalar(it->second, field + "." + key);
    }
    return out;
  }

  static const char* kind(const YAML::Node& n) {
    switch (n.Type()) {
      case YAML::NodeType::Sequence: return "list";
      case YAML::NodeType::Map: return "mapping";
      case YAML::NodeType::Null: return "null";
      case YAML::NodeType::Scalar: return "value";
      default: return "nothing";
    }
  }

  const std::string& origin() const { return origin_; }

  /// A number as a person writes it ("0.001", "1e+06").
  static std::string number_text(double v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", v);
    return buf;
  }

private:
  std::string origin_;
};

/// Runs `parse(reader, root)` on `text`: its value, or the first problem with its place.
template <class F>
auto load(const std::string& text, const std::string& origin, F parse)
  -> expected<decltype(parse(std::declval<const reader&>(), YAML::Node{}))> {
  reader r{origin};
  try {
    auto root = YAML::Load(text);
    return parse(r, root);
  } catch (const spec_error& e) {
    return failure{e.text};
  } catch (const YAML::Exception& e) {
    std::ostringstream out;
    out << origin;
    if (e.mark.line >= 0)
      out << ':' << (e.mark.line + 1) << ':' << (e.mark.column + 1);
    out << ": syntax: " << e.msg;
    return failure{out.str()};
  }
}

/// The text of a document file of at most 1 MiB; `what` names it in errors ("spec file").
inline expected<std::string> read_document(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return failure{path + ": cannot open the " + what};
  std::ostringstream buf;
  buf << in.rdbuf();
  if (buf.str().size() > 1024 * 1024)
    return failure{path + ": " + what + " larger than 1 MiB"};
  return buf.str();
}

} // namespace monkey::yaml
