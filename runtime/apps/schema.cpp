// SPDX-License-Identifier: Apache-2.0
#include "runtime/apps/schema.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>

#include <regex>

#include <nlohmann/json.hpp>

namespace monkey {

namespace {

using json = nlohmann::json;

const std::set<std::string> known_types{"int", "float", "bool", "string", "choice"};

std::string number_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  return buf;
}

} // namespace

const app_param* app_schema::find(const std::string& name) const {
  for (auto& p : params)
    if (p.name == name)
      return &p;
  return nullptr;
}

std::string to_json(const app_schema& s) {
  json j;
  j["app"] = s.app;
  j["description"] = s.description;
  j["sdk"] = s.sdk;
  j["policy"] = s.policy;
  j["actors"] = s.actors;
  j["params"] = json::array();
  for (auto& p : s.params) {
    json q;
    q["name"] = p.name;
    q["type"] = p.type;
    q["default"] = p.default_value;
    if (p.min)
      q["min"] = *p.min;
    if (p.max)
      q["max"] = *p.max;
    if (!p.values.empty())
      q["values"] = p.values;
    q["help"] = p.help;
    if (!p.pattern.empty()) {
      q["pattern"] = p.pattern;
      q["pattern_help"] = p.pattern_help;
    }
    if (!p.only_with.empty()) {
      q["only_with"] = p.only_with;
      q["only_with_values"] = p.only_with_values;
    }
    if (p.adds_ranks) {
      q["adds_ranks"] = true;
      if (!p.ranks_when.empty()) {
        q["ranks_when"] = p.ranks_when;
        q["ranks_when_values"] = p.ranks_when_values;
      }
    }
    j["params"].push_back(q);
  }
  return j.dump();
}

expected<app_schema> parse_app_schema(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return failure{"the app description is not a JSON object"};
  app_schema s;
  try {
    s.app = j.at("app").get<std::string>();
    s.description = j.value("description", "");
    s.sdk = j.value("sdk", "");
    s.policy = j.value("policy", "gang");
    if (j.contains("actors"))
      s.actors = j.at("actors").get<std::vector<std::string>>();
    if (j.contains("params"))
      for (auto& q : j.at("params")) {
        app_param p;
        p.name = q.at("name").get<std::string>();
        p.type = q.value("type", "string");
        p.default_value = q.value("default", "");
        if (q.contains("min"))
          p.min = q.at("min").get<double>();
        if (q.contains("max"))
          p.max = q.at("max").get<double>();
        if (q.contains("values"))
          p.values = q.at("values").get<std::vector<std::string>>();
        p.help = q.value("help", "");
        p.pattern = q.value("pattern", "");
        p.pattern_help = q.value("pattern_help", "");
        p.only_with = q.value("only_with", "");
        if (q.contains("only_with_values"))
          p.only_with_values = q.at("only_with_values").get<std::vector<std::string>>();
        p.adds_ranks = q.value("adds_ranks", false);
        p.ranks_when = q.value("ranks_when", "");
        if (q.contains("ranks_when_values"))
          p.ranks_when_values = q.at("ranks_when_values").get<std::vector<std::string>>();
        if (p.adds_ranks && p.type != "int")
          return failure{"parameter " + p.name + ": adds ranks, so it must be an int, not a "
                         + p.type};
        if (!p.pattern.empty()) {
          try {
            std::regex check(p.pattern);
          } catch (const std::regex_error& e) {
            return failure{"parameter " + p.name + ": its pattern '" + p.pattern
                           + "' is not a regular expression (" + e.what() + ")"};
          }
        }
        if (!known_types.count(p.type))
          return failure{"parameter " + p.name + ": unknown type '" + p.type
                         + "' (int, float, bool, string or choice)"};
        s.params.push_back(std::move(p));
      }
  } catch (const std::exception& e) {
    return failure{std::string("the app description is malformed: ") + e.what()};
  }
  if (s.app.empty())
    return failure{"the app description names no app"};
  if (s.policy != "gang" && s.policy != "rank")
    return failure{"policy: gang or rank, not '" + s.policy + "'"};
  return s;
}

std::string check_value(const app_param& p, const std::string& v) {
  auto range = [&](double x) -> std::string {
    if (p.min && x < *p.min)
      return "below its minimum " + number_text(*p.min);
    if (p.max && x > *p.max)
      return "above its maximum " + number_text(*p.max);
    return "";
  };
  if (p.type == "int") {
    errno = 0;
    char* end = nullptr;
    long long x = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || errno == ERANGE)
      return "an integer is expected";
    return range(static_cast<double>(x));
  }
  if (p.type == "float") {
    errno = 0;
    char* end = nullptr;
    double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(x))
      return "a number is expected";
    return range(x);
  }
  if (p.type == "bool") {
    if (v == "true" || v == "false" || v == "1" || v == "0")
      return "";
    return "true or false is expected";
  }
  if (p.type == "choice") {
    if (std::find(p.values.begin(), p.values.end(), v) != p.values.end())
      return "";
    std::string all;
    for (auto& x : p.values)
      all += (all.empty() ? "" : ", ") + x;
    return "one of " + all + " is expected";
  }
  if (!p.pattern.empty()) {
    bool ok = false;
    try {
      ok = std::regex_match(v, std::regex(p.pattern));
    } catch (const std::regex_error&) {
      ok = false; // parse_app_schema refused such a pattern already
    }
    if (!ok)
      return p.pattern_help.empty() ? "it does not match " + p.pattern
                                    : p.pattern_help + " is expected";
  }
  return "";
}

status check_params(const app_schema& s, const std::map<std::string, std::string>& params) {
  for (auto& [name, value] : params) {
    auto set = "--set " + name + "=" + value + ": ";
    if (name == "workers")
      return failure{set + "workers is a field of the job, not a parameter of the app: "
                           "use --workers " + value + " (file key `workers`)"};
    auto* p = s.find(name);
    if (!p) {
      std::string names;
      for (auto& q : s.params)
        names += (names.empty() ? "" : ", ") + q.name;
      return failure{set + "app '" + s.app + "' has no parameter '" + name + "' (its parameters: "
                     + (names.empty() ? "none" : names) + "; see monkey-app-" + s.app
                     + " --describe)"};
    }
    if (auto bad = check_value(*p, value); !bad.empty())
      return failure{set + name + " is " + (p->type == "choice" ? "a choice" : "of type " + p->type)
                     + ": " + bad};
    if (!p->only_with.empty()) {
      auto given = params.find(p->only_with);
      std::string other;
      if (given != params.end())
        other = given->second;
      else if (auto* q = s.find(p->only_with))
        other = q->default_value;
      auto& vals = p->only_with_values;
      if (std::find(vals.begin(), vals.end(), other) == vals.end()) {
        std::string all;
        for (auto& x : vals)
          all += (all.empty() ? "" : " or ") + x;
        return failure{set + name + " applies only with " + p->only_with + "=" + all + " (here "
                       + p->only_with + "=" + other + ")"};
      }
    }
  }
  return {};
}

std::map<std::string, std::string> with_defaults(const app_schema& s,
                                                 const std::map<std::string, std::string>& params) {
  auto out = params;
  for (auto& p : s.params)
    out.emplace(p.name, p.default_value);
  return out;
}

int32_t extra_ranks(const app_schema& s, const std::map<std::string, std::string>& params) {
  auto all = with_defaults(s, params);
  int64_t extra = 0;
  for (auto& p : s.params) {
    if (!p.adds_ranks)
      continue;
    if (!p.ranks_when.empty()) {
      auto& vals = p.ranks_when_values;
      if (std::find(vals.begin(), vals.end(), all[p.ranks_when]) == vals.end())
        continue;
    }
    extra += std::clamp<int64_t>(std::atoll(all[p.name].c_str()), 0, 4096);
  }
  return static_cast<int32_t>(std::min<int64_t>(extra, 4096));
}

const app_entry* find_app(const std::vector<member>& members, const std::string& name,
                          const std::string& prefer) {
  std::map<std::string, std::pair<int, const app_entry*>> builds;
  for (auto& m : members) {
    if (m.state != member_state::alive)
      continue;
    for (auto& a : m.apps)
      if (a.name == name) {
        if (m.node == prefer)
          return &a;
        auto& b = builds[a.build];
        b.first += 1;
        b.second = &a;
      }
  }
  const app_entry* best = nullptr;
  int most = 0;
  for (auto& [build, b] : builds) // ordered by build: ties go to the lowest
    if (b.first > most)
      most = b.first, best = b.second;
  return best;
}

const app_entry* find_build(const std::vector<member>& members, const std::string& name,
                            const std::string& build) {
  for (auto& m : members)
    if (m.state == member_state::alive)
      for (auto& a : m.apps)
        if (a.name == name && a.build == build)
          return &a;
  return nullptr;
}

std::string known_apps(const std::vector<member>& members) {
  std::set<std::string> names;
  for (auto& m : members)
    if (m.state == member_state::alive)
      for (auto& a : m.apps)
        names.insert(a.name);
  std::string out;
  for (auto& n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

std::string app_tag(const std::string& name, const std::string& build) {
  return "app:" + name + "@" + build;
}

} // namespace monkey
