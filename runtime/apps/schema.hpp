// SPDX-License-Identifier: Apache-2.0
#pragma once
// An app's description: its parameters (name, type, default, range or choices), its actor
// types and its failure policy, as `monkey-app-NAME --describe` prints it (JSON) and nodes
// gossip it. A submit checks `--set` against it here, on whichever node accepts the job,
// so a bad value is refused before anything is journaled. Plain C++: no CAF; schema.test.cpp.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/expected.hpp"
#include "runtime/membership.hpp"

namespace monkey {

struct app_param {
  std::string name;
  std::string type = "string"; ///< int, float, bool, string or choice
  std::string default_value;   ///< as text, as `--set` gives it
  std::optional<double> min, max;
  std::vector<std::string> values; ///< choice: the allowed values
  std::string help;
  std::string pattern;      ///< string: a regular expression (ECMAScript) the whole value matches
  std::string pattern_help; ///< what the pattern means, for the refusal ("widths like 512,256")
  std::string only_with;    ///< may be set only when this other parameter...
  std::vector<std::string> only_with_values; ///< ...has one of these values (given or default)
  /// An int parameter whose value is a count of ranks the app needs beyond the job's
  /// workers (fmnist's dedicated parameter servers), when `ranks_when` (if named) has one of
  /// `ranks_when_values`.
  bool adds_ranks = false;
  std::string ranks_when;
  std::vector<std::string> ranks_when_values;
};

struct app_schema {
  std::string app;
  std::string description;
  std::string sdk;              ///< the SDK version it was built with
  std::string policy = "gang";  ///< when a rank's actor fails: gang or rank (restart that rank)
  std::vector<std::string> actors; ///< its actor types (the entry first)
  std::vector<app_param> params;

  const app_param* find(const std::string& name) const;
};

/// The JSON form (what --describe prints).
std::string to_json(const app_schema& s);
/// Reads --describe's output; a failure names what is wrong.
expected<app_schema> parse_app_schema(const std::string& json);

/// Checks one value against its parameter: "" when valid, else why not ("an integer is
/// expected", "above its maximum 10").
std::string check_value(const app_param& p, const std::string& value);

/// Checks a submission's parameters: every name known, every value valid, and a parameter
/// that belongs with another's values (only_with) set only with them. A failure reads
/// "--set NAME=VALUE: ..." and names the field; `workers` gets a hint (it is a spec field).
status check_params(const app_schema& s, const std::map<std::string, std::string>& params);

/// The ranks a submission's parameters add beyond its workers (app_param::adds_ranks).
int32_t extra_ranks(const app_schema& s, const std::map<std::string, std::string>& params);

/// The parameters with every default filled in.
std::map<std::string, std::string> with_defaults(const app_schema& s,
                                                 const std::map<std::string, std::string>& params);

/// App `name` as the alive members have it: the build of `prefer` (this node) when it has
/// the app, else the build most alive members have (ties: the lowest build hash). nullptr
/// when no alive member has it.
const app_entry* find_app(const std::vector<member>& members, const std::string& name,
                          const std::string& prefer);

/// Build `build` of app `name` on an alive member, or nullptr (a forwarded or retried
/// submit keeps the build chosen first).
const app_entry* find_build(const std::vector<member>& members, const std::string& name,
                            const std::string& build);

/// The names of the apps the alive members have ("fmnist, hello"), or "none".
std::string known_apps(const std::vector<member>& members);

/// The tag a node with app `name` of build `build` offers (placement matches it).
std::string app_tag(const std::string& name, const std::string& build);

} // namespace monkey
