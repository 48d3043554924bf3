// SPDX-License-Identifier: Apache-2.0
// An app's definition (monkey/app.hpp): its parameters, actor types and failure policy, and
// the schema a node checks submissions against (`--describe`).
#include "monkey/app.hpp"

#include <cstdio>

#include "host_state.hpp"
#include "monkey/sdk/version.hpp"

namespace monkey::app {

// ---- definition ----------------------------------------------------------------------------

definition::definition(std::string name, std::string description)
  : name_(std::move(name)), description_(std::move(description)) {}

definition& definition::add(param_decl p) {
  params_.push_back(std::move(p));
  return *this;
}

namespace {

definition::param_decl make_param(std::string name, std::string type, std::string def,
                                  std::string help, std::optional<double> min = {},
                                  std::optional<double> max = {},
                                  std::vector<std::string> values = {}) {
  definition::param_decl p;
  p.name = std::move(name);
  p.type = std::move(type);
  p.def = std::move(def);
  p.help = std::move(help);
  p.min = min;
  p.max = max;
  p.values = std::move(values);
  return p;
}

} // namespace

definition& definition::int_param(std::string name, int64_t def, int64_t min, int64_t max,
                                  std::string help) {
  return add(make_param(std::move(name), "int", std::to_string(def), std::move(help),
                        static_cast<double>(min), static_cast<double>(max)));
}

definition& definition::float_param(std::string name, double def, double min, double max,
                                    std::string help) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.15g", def);
  return add(make_param(std::move(name), "float", buf, std::move(help), min, max));
}

definition& definition::bool_param(std::string name, bool def, std::string help) {
  return add(make_param(std::move(name), "bool", def ? "true" : "false", std::move(help)));
}

definition& definition::string_param(std::string name, std::string def, std::string help) {
  return add(make_param(std::move(name), "string", std::move(def), std::move(help)));
}

definition& definition::choice_param(std::string name, std::string def,
                                     std::vector<std::string> values, std::string help) {
  return add(make_param(std::move(name), "choice", std::move(def), std::move(help), {}, {},
                        std::move(values)));
}

definition& definition::pattern(std::string regex, std::string what) {
  if (!params_.empty()) {
    params_.back().pattern = std::move(regex);
    params_.back().pattern_help = std::move(what);
  }
  return *this;
}

definition& definition::only_with(std::string other, std::vector<std::string> values) {
  if (!params_.empty()) {
    params_.back().only_with = std::move(other);
    params_.back().only_with_values = std::move(values);
  }
  return *this;
}

definition& definition::adds_ranks(std::string when, std::vector<std::string> values) {
  if (!params_.empty()) {
    params_.back().adds_ranks = true;
    params_.back().ranks_when = std::move(when);
    params_.back().ranks_when_values = std::move(values);
  }
  return *this;
}

definition& definition::entry(std::string actor_name, actor_fn fn) {
  actors_.insert(actors_.begin(), actor_decl{std::move(actor_name), std::move(fn)});
  return *this;
}

definition& definition::actor(std::string actor_name, actor_fn fn) {
  actors_.push_back(actor_decl{std::move(actor_name), std::move(fn)});
  return *this;
}

definition& definition::on_failure(failure_policy p, int max_restarts, std::chrono::seconds window) {
  policy_ = p;
  max_restarts_ = max_restarts;
  window_ = window;
  return *this;
}

/// (host_state.hpp)
app_schema schema_of(const definition& d) {
  app_schema s;
  s.app = d.name();
  s.description = d.description();
  s.sdk = MONKEY_VERSION;
  s.policy = d.policy() == failure_policy::gang ? "gang" : "rank";
  for (auto& a : d.actors())
    s.actors.push_back(a.name);
  for (auto& p : d.params()) {
    app_param q;
    q.name = p.name;
    q.type = p.type;
    q.default_value = p.def;
    q.min = p.min;
    q.max = p.max;
    q.values = p.values;
    q.help = p.help;
    q.pattern = p.pattern;
    q.pattern_help = p.pattern_help;
    q.only_with = p.only_with;
    q.only_with_values = p.only_with_values;
    q.adds_ranks = p.adds_ranks;
    q.ranks_when = p.ranks_when;
    q.ranks_when_values = p.ranks_when_values;
    s.params.push_back(std::move(q));
  }
  return s;
}

} // namespace monkey::app
