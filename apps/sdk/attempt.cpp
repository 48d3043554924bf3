// SPDX-License-Identifier: Apache-2.0
#include "monkey/sdk/attempt.hpp"

#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "monkey/sdk/version.hpp"

extern char** environ;

namespace monkey::sdk {

namespace {

const std::string param_prefix = "MONKEY_PARAM_";

template <class T>
bool parse_number(const std::map<std::string, std::string>& env, const char* name, T& out,
                  context_error* error) {
  auto it = env.find(name);
  if (it == env.end())
    return true; // optional: the default stays
  const auto& text = it->second;
  char* end = nullptr;
  errno = 0;
  auto v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0'
      || (std::is_unsigned<T>::value && (v < 0 || text[0] == '-'))) {
    if (std::is_unsigned<T>::value && !text.empty() && text[0] != '-') {
      errno = 0;
      auto u = std::strtoull(text.c_str(), &end, 10);
      if (errno == 0 && *end == '\0') {
        out = static_cast<T>(u);
        return true;
      }
    }
    if (error)
      error->what = std::string(name) + ": not a number: '" + text + "'";
    return false;
  }
  out = static_cast<T>(v);
  return true;
}

} // namespace

std::string param_env_name(const std::string& name) {
  std::string out = param_prefix;
  for (char c : name)
    out += std::isalnum(static_cast<unsigned char>(c))
             ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
             : '_';
  return out;
}

std::optional<std::string> attempt_context::param(const std::string& name) const {
  auto it = params.find(param_env_name(name).substr(param_prefix.size()));
  if (it == params.end())
    return std::nullopt;
  return it->second;
}

std::optional<attempt_context> attempt_from(const std::map<std::string, std::string>& env,
                                            context_error* error) {
  attempt_context ctx;
  auto id = env.find("MONKEY_JOB_ID");
  if (id == env.end() || id->second.empty()) {
    if (error)
      error->what = "MONKEY_JOB_ID is not set: this process was not started by Monkey";
    return std::nullopt;
  }
  ctx.job_id = id->second;
  if (auto it = env.find("MONKEY_ATTEMPT_ID"); it != env.end())
    ctx.attempt_id = it->second;
  if (!parse_number(env, "MONKEY_ATTEMPT", ctx.attempt, error)
      || !parse_number(env, "MONKEY_SEED", ctx.seed, error)
      || !parse_number(env, "MONKEY_ARRAY_INDEX", ctx.array_index, error))
    return std::nullopt;
  for (auto& [k, v] : env)
    if (k.size() > param_prefix.size() && k.compare(0, param_prefix.size(), param_prefix) == 0)
      ctx.params[k.substr(param_prefix.size())] = v;
  return ctx;
}

std::optional<attempt_context> current_attempt(context_error* error) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos && kv.compare(0, 7, "MONKEY_") == 0)
      env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return attempt_from(env, error);
}

const char* version() {
  return MONKEY_VERSION;
}

} // namespace monkey::sdk
