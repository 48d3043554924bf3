// SPDX-License-Identifier: Apache-2.0
#pragma once
// Reading YAML documents (job specs, sweep files) with errors that name the place:
// `file:line:col: field: problem`. Internal to the runtime library (yaml-cpp is a private
// dependency): include it from .cpp files only.

#include <algorithm>
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

  /// Runs `f`; a problem it finds (fail) is kept and parsing goes on, so that one run
  /// reports every mistake of a document, as a compiler does. Whether `f` failed.
  template <class F>
  bool guard(F&& f) const {
    try {
      f();
      return true;
    } catch (const spec_error& e) {
      problems_.push_back(e.text);
      return false;
    }
  }
  /// The problems kept by guard, in the order found.
  const std::vector<std::string>& problems() const { return problems_; }

  /// The node at `dotted` ("trial.command") under `root`, or the deepest one on the way that
  /// exists (a missing field's parent): where a problem about that field is reported.
  static YAML::Node at(const YAML::Node& root, const std::string& dotted) {
    YAML::Node n = root;
    size_t from = 0;
    while (from <= dotted.size() && n.IsMap()) {
      auto dot = dotted.find('.', from);
      auto part = dotted.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
      YAML::Node next = n[part];
      if (!next)
        break;
      n = next;
      if (dot == std::string::npos)
        break;
      from = dot + 1;
    }
    return n;
  }

  /// A number as a person writes it ("0.001", "1e+06").
  static std::string number_text(double v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", v);
    return buf;
  }

private:
  std::string origin_;
  mutable std::vector<std::string> problems_;
};

/// Every problem, one per line, in the order of the document (line, then column), and how
/// many there are when more than one.
inline std::string problems_text(const std::string& origin, std::vector<std::string> problems) {
  auto place = [&](const std::string& p) {
    long line = 1L << 30, col = 0; // problems without a place last
    if (p.compare(0, origin.size() + 1, origin + ":") == 0)
      std::sscanf(p.c_str() + origin.size() + 1, "%ld:%ld", &line, &col);
    return std::make_pair(line, col);
  };
  std::stable_sort(problems.begin(), problems.end(),
                   [&](const std::string& x, const std::string& y) { return place(x) < place(y); });
  std::string out;
  for (auto& p : problems)
    out += (out.empty() ? "" : "\n") + p;
  if (problems.size() > 1)
    out += "\n" + std::to_string(problems.size()) + " problems";
  return out;
}

/// Runs `parse(reader, root)` on `text`: its value, or every problem found with its place
/// (parse goes on past a problem where it can: reader::guard).
template <class F>
auto load(const std::string& text, const std::string& origin, F parse)
  -> expected<decltype(parse(std::declval<const reader&>(), YAML::Node{}))> {
  reader r{origin};
  try {
    auto root = YAML::Load(text);
    auto value = parse(r, root);
    if (!r.problems().empty())
      return failure{problems_text(origin, r.problems())};
    return value;
  } catch (const spec_error& e) {
    auto all = r.problems();
    all.push_back(e.text);
    return failure{problems_text(origin, all)};
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
