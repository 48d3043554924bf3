// SPDX-License-Identifier: Apache-2.0
#include "runtime/faults.hpp"

#include <cstdlib>
#include <random>
#include <thread>
#include <unistd.h>

#include "runtime/spec_parser.hpp"

namespace monkey {

expected<fault_settings> parse_faults(const std::string& text) {
  fault_settings out;
  size_t pos = 0;
  while (pos < text.size()) {
    auto comma = text.find(',', pos);
    auto item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? text.size() : comma + 1;
    if (item.empty())
      continue;
    auto eq = item.find('=');
    if (eq == std::string::npos)
      return failure{"MONKEY_FAULTS: '" + item + "' is not KEY=VALUE"};
    auto key = item.substr(0, eq);
    auto value = item.substr(eq + 1);
    auto duration = [&](std::chrono::milliseconds& field) -> std::string {
      auto d = parse_duration_s(value);
      if (!d || *d < 0 || *d > 600)
        return "MONKEY_FAULTS: " + key + ": expected a duration up to 10m such as 300ms, got '"
               + value + "'";
      field = std::chrono::milliseconds(static_cast<int64_t>(*d * 1000));
      return {};
    };
    std::string problem;
    if (key == "journal_delay")
      problem = duration(out.journal_delay);
    else if (key == "journal_jitter")
      problem = duration(out.journal_jitter);
    else if (key == "journal_fail_if")
      out.journal_fail_if = value;
    else
      problem = "MONKEY_FAULTS: unknown fault '" + key
                + "' (known: journal_delay, journal_jitter, journal_fail_if)";
    if (!problem.empty())
      return failure{problem};
  }
  return out;
}

const fault_settings& faults() {
  static const fault_settings active = [] {
    auto* env = std::getenv("MONKEY_FAULTS");
    if (!env || !*env)
      return fault_settings{};
    auto parsed = parse_faults(env);
    return parsed ? *parsed : fault_settings{};
  }();
  return active;
}

status journal_fault() {
  auto& f = faults();
  if (!f.any())
    return {};
  auto delay = f.journal_delay;
  if (f.journal_jitter.count() > 0) {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    delay += std::chrono::milliseconds(
      std::uniform_int_distribution<int64_t>(0, f.journal_jitter.count())(rng));
  }
  if (delay.count() > 0)
    std::this_thread::sleep_for(delay);
  if (!f.journal_fail_if.empty() && ::access(f.journal_fail_if.c_str(), F_OK) == 0)
    return failure{"injected fault: journal writes fail while " + f.journal_fail_if + " exists"};
  return {};
}

} // namespace monkey
