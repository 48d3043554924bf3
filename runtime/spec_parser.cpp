// SPDX-License-Identifier: Apache-2.0
#include "runtime/spec_parser.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "runtime/yaml_reader.hpp"

namespace monkey {

namespace {

using yaml::reader;

void parse_resources(const reader& r, const YAML::Node& n, job_spec& s) {
  if (!n.IsMap())
    r.fail(n, "resources", std::string("expected a mapping, got a ") + reader::kind(n));
  for (auto it = n.begin(); it != n.end(); ++it)
    r.guard([&] { // each field's problem is reported, and the next field read
      auto key = r.scalar(it->first, "resources");
      YAML::Node v = it->second; // a handle: it->second lives only as long as the expression
      auto field = "resources." + key;
      if (key == "cpus")
        s.cpus = static_cast<int32_t>(r.integer(v, field, 1, 4096));
      else if (key == "gpus")
        s.gpus = static_cast<int32_t>(r.integer(v, field, 0, 64));
      else if (key == "mem" || key == "gpu_mem") {
        auto mb = parse_memory_mb(r.scalar(v, field));
        if (!mb)
          r.fail(v, field, mb.error());
        (key == "mem" ? s.mem_mb : s.gpu_mem_mb) = *mb;
      } else if (key == "tags")
        s.tags = r.string_list(v, field);
      else
        r.fail(it->first, field, "unknown field (known: cpus, gpus, gpu_mem, mem, tags)");
    });
}

job_spec parse_node(const reader& r, const YAML::Node& root, ship_intent& ship) {
  if (!root.IsMap())
    r.fail(root, "spec", std::string("expected a mapping at the top level, got a ")
                           + reader::kind(root));
  job_spec s;
  for (auto it = root.begin(); it != root.end(); ++it)
    r.guard([&] { // each field's problem is reported, and the next field read
      auto key = r.scalar(it->first, "spec");
      YAML::Node v = it->second; // a handle: it->second lives only as long as the expression
      if (key == "name")
        s.name = r.scalar(v, key);
      else if (key == "command") {
        if (v.IsScalar())
          r.fail(v, key, "expected a list of arguments (argv), e.g. [python3, train.py]");
        s.command = r.string_list(v, key);
        if (s.command.empty())
          r.fail(v, key, "empty list");
      } else if (key == "app")
        s.app = r.scalar(v, key);
      else if (key == "params")
        s.params = r.string_map(v, key);
      else if (key == "resources")
        parse_resources(r, v, s);
      else if (key == "retries")
        s.retries = static_cast<int32_t>(r.integer(v, key, 0, 1000));
      else if (key == "max_requeues")
        s.max_requeues = static_cast<int32_t>(r.integer(v, key, 0, 1000));
      else if (key == "timeout") {
        auto d = parse_duration_s(r.scalar(v, key));
        if (!d)
          r.fail(v, key, d.error());
        s.timeout_s = *d;
      } else if (key == "time_estimate") {
        auto d = parse_duration_s(r.scalar(v, key));
        if (!d)
          r.fail(v, key, d.error());
        s.time_estimate_s = *d;
      } else if (key == "retry_backoff") {
        auto b = parse_backoff(r.scalar(v, key));
        if (!b)
          r.fail(v, key, b.error());
        s.retry_backoff_s = b->first;
        s.retry_backoff_max_s = b->second;
      } else if (key == "priority")
        s.priority = static_cast<int32_t>(r.integer(v, key, -1000000, 1000000));
      else if (key == "workdir")
        s.workdir = r.scalar(v, key);
      else if (key == "env")
        s.env = r.string_map(v, key);
      else if (key == "seed") {
        auto text = r.scalar(v, key);
        char* end = nullptr;
        errno = 0;
        auto val = std::strtoull(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0' || errno == ERANGE || text[0] == '-')
          r.fail(v, key, "expected a non-negative integer, got '" + text + "'");
        s.seed = val;
        s.has_seed = true;
      } else if (key == "tags")
        s.tags = r.string_list(v, key);
      else if (key == "after") {
        auto list = v.IsScalar() ? std::vector<std::string>{v.Scalar()} : r.string_list(v, key);
        for (size_t i = 0; i < list.size(); ++i) {
          auto d = parse_dependency(list[i]);
          if (!d)
            r.fail(v.IsSequence() ? v[i] : v, key, d.error());
          s.after.push_back(*d);
        }
      } else if (key == "checkpoint_from") {
        s.checkpoint_from = r.scalar(v, key);
      } else if (key == "ship") {
        auto b = r.scalar(v, key);
        if (b != "true" && b != "false")
          r.fail(v, key, "expected true or false, got '" + b + "'");
        ship.workdir = b == "true";
      } else if (key == "data") {
        ship.data = v.IsScalar() ? std::vector<std::string>{v.Scalar()} : r.string_list(v, key);
        for (size_t i = 0; i < ship.data.size(); ++i)
          if (ship.data[i].empty())
            r.fail(v.IsSequence() ? v[i] : v, key, "an empty path");
      } else if (key == "array") {
        s.array = r.scalar(v, key);
        if (auto a = expand_array(s.array); !a)
          r.fail(v, key, a.error());
      } else
        r.fail(it->first, key,
               "unknown field (known: name, command, app, params, resources, retries, "
               "retry_backoff, max_requeues, timeout, time_estimate, priority, workdir, env, seed, tags, "
               "after, array, workers, checkpoint_from, ship, data)");
    });
  bool read = r.problems().empty();
  if (s.command.empty() && s.app.empty() && !root["command"] && !root["app"])
    r.guard([&] { r.fail(root, "command", "missing required field (or give app)"); });
  // The whole spec's rules, once its fields were read: reported at the field they name.
  if (auto bad = validate(s); read && r.problems().empty() && !bad) {
    const auto& problem = bad.error();
    auto field = problem.substr(0, problem.find(':'));
    bool resource = !root[field] && root["resources"].IsMap() && root["resources"][field];
    if (resource) // written under resources:
      field = "resources." + field;
    r.fail(reader::at(root, field), field, problem.substr(problem.find(':') + 2));
  }
  return s;
}

} // namespace

expected<job_spec> parse_spec_text(const std::string& text, const std::string& origin,
                                   ship_intent* ship) {
  ship_intent ignored;
  auto& out = ship ? *ship : ignored;
  return yaml::load(text, origin,
                    [&](const reader& r, const YAML::Node& root) { return parse_node(r, root, out); });
}

expected<job_spec> parse_spec_file(const std::string& path, ship_intent* ship) {
  auto text = yaml::read_document(path, "spec file");
  if (!text)
    return failure{text.error()};
  return parse_spec_text(*text, path, ship);
}

expected<int64_t> parse_memory_mb(const std::string& text) {
  if (text.empty())
    return failure{"empty memory size"};
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  std::string unit(end);
  double mult;
  if (unit.empty() || unit == "M" || unit == "MB" || unit == "m" || unit == "MiB")
    mult = 1;
  else if (unit == "G" || unit == "GB" || unit == "g" || unit == "GiB")
    mult = 1024;
  else if (unit == "T" || unit == "TB" || unit == "TiB")
    mult = 1024 * 1024;
  else if (unit == "K" || unit == "KB" || unit == "k" || unit == "KiB")
    mult = 1.0 / 1024;
  else
    return failure{"'" + text + "' is not a memory size (use e.g. 512M or 4G)"};
  if (end == text.c_str() || !(v >= 0) || v * mult > 1e12)
    return failure{"'" + text + "' is not a memory size (use e.g. 512M or 4G)"};
  return static_cast<int64_t>(std::ceil(v * mult));
}

expected<std::pair<double, double>> parse_backoff(const std::string& text) {
  auto dots = text.find("..");
  auto first = parse_duration_s(text.substr(0, dots));
  if (!first)
    return failure{"'" + text + "': " + first.error() + " (expected e.g. 1s..1m, 5s or 0)"};
  double most = std::max(*first, 60.0);
  if (dots != std::string::npos) {
    auto m = parse_duration_s(text.substr(dots + 2));
    if (!m)
      return failure{"'" + text + "': " + m.error() + " (expected e.g. 1s..1m, 5s or 0)"};
    if (*m < *first)
      return failure{"'" + text + "': the longest wait is shorter than the first"};
    most = *m;
  }
  return std::pair<double, double>{*first, most};
}

expected<double> parse_duration_s(const std::string& text) {
  if (text.empty())
    return failure{"empty duration"};
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  std::string unit(end);
  double mult;
  if (unit.empty() || unit == "s")
    mult = 1;
  else if (unit == "ms")
    mult = 0.001;
  else if (unit == "m" || unit == "min")
    mult = 60;
  else if (unit == "h")
    mult = 3600;
  else if (unit == "d")
    mult = 86400;
  else
    return failure{"'" + text + "' is not a duration (use e.g. 90, 90s, 10m or 2h)"};
  if (end == text.c_str() || !(v >= 0) || !std::isfinite(v))
    return failure{"'" + text + "' is not a duration (use e.g. 90, 90s, 10m or 2h)"};
  return v * mult;
}

expected<dependency> parse_dependency(const std::string& text) {
  dependency d;
  std::string id = text;
  auto colon = text.find(':');
  if (colon != std::string::npos) {
    d.kind = text.substr(0, colon);
    id = text.substr(colon + 1);
    if (d.kind != "ok" && d.kind != "any")
      return failure{"dependency '" + text + "': kind must be ok or any"};
  } else {
    d.kind = "ok";
  }
  auto parsed = job_id::parse(id);
  if (!parsed)
    return failure{"dependency '" + text + "': '" + id + "' is not a full job id (26 characters)"};
  d.job = *parsed;
  return d;
}

} // namespace monkey
