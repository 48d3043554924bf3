// SPDX-License-Identifier: Apache-2.0
// What the verbs print: ages, times, and the JSON forms of the protocol's records.
#include "runtime/bin/cli/cli.hpp"

#include <cerrno>
#include <cstdlib>
#include <ctime>

namespace monkey::cli {

int fail(const std::string& msg, int code) {
  std::fprintf(stderr, "monkey: %s\n", msg.c_str());
  return code;
}

std::string age(int64_t ms) {
  auto s = (now_ms() - ms) / 1000;
  if (s < 60)
    return std::to_string(s) + "s";
  if (s < 3600)
    return std::to_string(s / 60) + "m";
  if (s < 86400)
    return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
}

CLI::Validator whole_number(long long lo, long long hi) {
  auto range = std::to_string(lo) + " to " + std::to_string(hi);
  return CLI::Validator(
    [lo, hi, range](std::string& in) -> std::string {
      errno = 0;
      char* end = nullptr;
      long long v = std::strtoll(in.c_str(), &end, 10);
      if (in.empty() || *end != '\0' || errno == ERANGE)
        return "a whole number from " + range + " is expected, not '" + in + "'";
      if (v < lo || v > hi)
        return "must be from " + range + ", not " + in;
      return {};
    },
    "INT in " + range);
}

std::string clock_time(int64_t ms) {
  if (ms <= 0)
    return "-";
  time_t t = ms / 1000;
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  return buf;
}

json to_json(const job_summary& s) {
  json j = {{"id", s.id.str()},         {"name", s.name},
          {"state", s.unavailable ? "unavailable" : to_string(s.state)},
          {"attempts", s.attempts},   {"holders", s.holders},
          {"priority", s.priority},   {"cpus", s.cpus},
          {"gpus", s.gpus},           {"submitted_ms", s.submitted_ms},
          {"updated_ms", s.updated_ms}, {"exit_code", s.exit_code},
          {"reason", s.reason},       {"owner", s.owner},
          {"ran_on", s.ran_on},       {"version", s.version},
          {"params", s.params},       {"metrics", s.metrics},
          {"metric_counts", s.metric_counts}};
  if (!s.sweep.empty()) {
    j["sweep"] = s.sweep;
    j["trial"] = s.trial;
  }
  if (s.driver)
    j["driver"] = true;
  return j;
}

std::string shell_quote(const std::string& arg) {
  if (!arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789_./=:,@%+-")
                        == std::string::npos)
    return arg;
  std::string out = "'";
  for (char c : arg)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string command_line(const job_spec& spec) {
  auto argv = substitute_params(spec);
  std::string out;
  for (auto& a : argv ? *argv : spec.command)
    out += (out.empty() ? "" : " ") + shell_quote(a);
  return out;
}

std::string submit_line(const job_spec& spec) {
  std::string out = "monkey submit";
  if (!spec.app.empty())
    out += " --app " + shell_quote(spec.app) + " --workers " + std::to_string(spec.workers);
  if (spec.cpus > 1)
    out += " --cpus " + std::to_string(spec.cpus);
  if (spec.gpus > 0)
    out += " --gpus " + std::to_string(spec.gpus);
  for (auto& [k, v] : spec.params)
    out += " --set " + shell_quote(k + "=" + v);
  if (spec.has_seed)
    out += " --seed " + std::to_string(spec.seed);
  if (spec.app.empty())
    out += " -- " + command_line(spec);
  return out;
}

json to_json(const attempt_record& a) {
  return {{"number", a.number},       {"attempt_id", a.id.str()}, {"outcome", a.outcome},
          {"cause", a.cause},         {"started_ms", a.started_ms}, {"ended_ms", a.ended_ms},
          {"pid", a.pid},             {"pgid", a.pgid},           {"exit_code", a.exit_code},
          {"signal", a.term_signal},  {"max_rss_kb", a.max_rss_kb}, {"cpu_s", a.cpu_s},
          {"log_out", a.log_out},     {"log_err", a.log_err},     {"node", a.id.node.str()},
          {"hosts", a.hosts},         {"resumed_step", a.resumed_step},
          {"resumed_from", a.resumed_from}};
}

json to_json(const show_reply& r) {
  auto& rec = r.record;
  json attempts = json::array();
  for (auto& a : rec.attempts)
    attempts.push_back(to_json(a));
  json deps = json::array();
  for (auto& d : rec.spec.after)
    deps.push_back(d.kind + ":" + d.job.str());
  json ship = json::array();
  for (auto& b : rec.spec.ship)
    ship.push_back({{"kind", b.kind}, {"source", b.source}, {"sha256", b.sha256},
                    {"bytes", b.bytes}, {"files", b.files}, {"into", b.into}, {"cwd", b.cwd}});
  json history = json::object();
  for (auto& [k, s] : r.metric_history)
    history[k] = {{"count", s.count}, {"first", s.first}, {"min", s.min}, {"max", s.max},
                  {"last", s.last}};
  json series = json::array();
  for (auto& p : r.series)
    series.push_back({{"attempt", p.attempt}, {"rank", p.rank}, {"step", p.step},
                      {"ts_ms", p.ts_ms}, {"value", p.value}});
  return {{"id", rec.id.str()},
          {"name", display_name(rec.spec)},
          {"state", to_string(rec.state)},
          {"reason", rec.reason},
          {"version", rec.version},
          {"owner", rec.owner.str()},
          {"replicas", rec.replicas},
          {"user", rec.spec.user},
          {"host", rec.spec.host},
          {"command", rec.spec.command},
          {"app", rec.spec.app},
          {"app_build", rec.spec.app_build},
          {"workers", rec.spec.workers},
          {"extra_ranks", rec.spec.extra_ranks},
          {"params", rec.spec.params},
          {"cpus", rec.spec.cpus},
          {"gpus", rec.spec.gpus},
          {"mem_mb", rec.spec.mem_mb},
          {"retries", rec.spec.retries},
          {"retries_used", rec.retries_used},
          {"max_requeues", rec.spec.max_requeues},
          {"requeues_used", rec.requeues_used},
          {"timeout_s", rec.spec.timeout_s},
          {"priority", rec.spec.priority},
          {"seed", rec.spec.seed},
          {"sweep", rec.spec.sweep},
          {"trial", rec.spec.trial},
          {"checkpoint_from", rec.spec.checkpoint_from},
          {"ship", ship},
          {"provenance", rec.spec.provenance},
          {"array_index", rec.spec.array_index},
          {"after", deps},
          {"submitted_ms", rec.submitted_ms},
          {"updated_ms", rec.updated_ms},
          {"attempts", attempts},
          {"command_line", command_line(rec.spec)},
          {"retry_backoff_s", rec.spec.retry_backoff_s},
          {"retry_backoff_max_s", rec.spec.retry_backoff_max_s},
          {"not_before_ms", rec.not_before_ms},
          {"metrics", r.last_metrics},
          {"metric_history", history},
          {"series", series},
          {"why", r.why}};
}

json to_json(const status_reply& s) {
  json devs = json::array();
  for (auto& d : s.devices)
    devs.push_back({{"name", d.name},   {"kind", d.kind},
                    {"model", d.model}, {"slots", d.slots},
                    {"free_slots", d.free_slots}, {"memory_mb", d.memory_mb},
                    {"gflops", d.gflops}});
  return {{"node", s.node},           {"incarnation", s.incarnation}, {"address", s.address},
          {"pid", s.pid},             {"started_ms", s.started_ms},   {"version", s.version},
          {"accepting", s.accepting}, {"jobs", s.jobs_by_state},      {"cpus_total", s.cpus_total},
          {"cpus_free", s.cpus_free}, {"gpus_total", s.gpus_total},   {"gpus_free", s.gpus_free},
          {"mem_total_mb", s.mem_total_mb}, {"mem_free_mb", s.mem_free_mb}, {"devices", devs},
          {"sizes", s.sizes}};
}

int exit_code_of(const job_record& rec) {
  switch (rec.state) {
    case job_state::succeeded: return 0;
    case job_state::cancelled: return exit_cancelled;
    case job_state::timed_out: return exit_timed_out;
    case job_state::lost: return exit_lost;
    case job_state::stopped: return exit_stopped;
    default: break;
  }
  if (rec.attempts.empty())
    return 1;
  auto& a = rec.attempts.back();
  if (a.term_signal > 0)
    return 128 + a.term_signal;
  return a.exit_code > 0 ? a.exit_code : 1;
}

} // namespace monkey::cli
