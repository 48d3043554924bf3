// SPDX-License-Identifier: Apache-2.0
#include "runtime/job.hpp"

#include "runtime/ship/bundle.hpp"

#include "monkey/sdk/attempt.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <set>

namespace monkey {

const char* to_string(job_state s) {
  switch (s) {
    case job_state::queued: return "queued";
    case job_state::running: return "running";
    case job_state::succeeded: return "succeeded";
    case job_state::failed: return "failed";
    case job_state::cancelled: return "cancelled";
    case job_state::timed_out: return "timed_out";
    case job_state::lost: return "lost";
    case job_state::stopped: return "stopped";
  }
  return "unknown";
}

bool is_final(job_state s) {
  return s != job_state::queued && s != job_state::running;
}

std::string param_env_name(const std::string& param) {
  return sdk::param_env_name(param); // the SDK reads them back by the same rule
}

std::string rank_log_path(const std::string& log_out, int32_t rank) {
  auto base = log_out;
  if (base.size() > 4 && base.compare(base.size() - 4, 4, ".out") == 0)
    base.resize(base.size() - 4);
  return base + ".rank-" + std::to_string(rank) + ".log";
}

std::string rank_list_text(const std::vector<int32_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1)
      ++j;
    out += (out.empty() ? "" : ",") + std::to_string(ranks[i]);
    if (j > i)
      out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int32_t> parse_rank_list(const std::string& text) {
  std::vector<int32_t> out;
  size_t i = 0;
  while (i <= text.size()) {
    auto comma = std::min(text.find(',', i), text.size());
    auto part = text.substr(i, comma - i);
    char* end = nullptr;
    long a = std::strtol(part.c_str(), &end, 10);
    long b = a;
    if (*end == '-')
      b = std::strtol(end + 1, &end, 10);
    if (part.empty() || !std::isdigit(static_cast<unsigned char>(part[0])) || *end != '\0'
        || b < a || b >= 1 << 20)
      return {};
    for (long r = a; r <= b; ++r)
      out.push_back(static_cast<int32_t>(r));
    i = comma + 1;
  }
  return out;
}

std::string workers_text(const job_spec& s) {
  auto text = std::to_string(s.workers) + (s.workers == 1 ? " worker" : " workers");
  if (s.extra_ranks > 0)
    text += " + " + std::to_string(s.extra_ranks) + (s.extra_ranks == 1 ? " more rank" : " more ranks");
  return text;
}

status validate(const job_spec& s) {
  if (s.command.empty() && s.app.empty())
    return failure{"command: missing (give a command after `--`, or an app)"};
  if (!s.command.empty() && !s.app.empty())
    return failure{"app: a job runs either a command or an app, not both"};
  if (!s.command.empty() && s.command[0].empty())
    return failure{"command: the executable is an empty string"};
  if (s.workers < 1 || s.workers > 4096)
    return failure{"workers: must be between 1 and 4096, got " + std::to_string(s.workers)};
  if (s.app.empty() && s.extra_ranks != 0)
    return failure{"extra_ranks: only an app's parameters add ranks to a job"};
  if (s.extra_ranks < 0 || s.ranks() > 4096)
    return failure{"workers: " + std::to_string(s.workers) + " workers and "
                   + std::to_string(s.extra_ranks) + " more ranks of the app exceed 4096 ranks"};
  if (s.cpus < (s.driver ? 0 : 1) || s.cpus > 4096) // a driver may hold no slot
    return failure{"cpus: must be between 1 and 4096, got " + std::to_string(s.cpus)};
  if (s.gpus < 0 || s.gpus > 64)
    return failure{"gpus: must be between 0 and 64, got " + std::to_string(s.gpus)};
  if (s.mem_mb < 0)
    return failure{"mem: must not be negative"};
  if (s.gpu_mem_mb < 0)
    return failure{"gpu_mem: must not be negative"};
  if (s.gpu_mem_mb > 0 && s.gpus == 0)
    return failure{"gpu_mem: set, but the job asks for no gpus"};
  if (s.retries < 0 || s.retries > 1000)
    return failure{"retries: must be between 0 and 1000, got " + std::to_string(s.retries)};
  if (s.max_requeues < 0 || s.max_requeues > 1000)
    return failure{"max_requeues: must be between 0 and 1000, got " + std::to_string(s.max_requeues)};
  if (!(s.timeout_s >= 0) || s.timeout_s > 365.0 * 86400)
    return failure{"timeout: must be between 0 (none) and one year in seconds"};
  if (!(s.time_estimate_s >= 0) || s.time_estimate_s > 365.0 * 86400)
    return failure{"time_estimate: must be between 0 (none) and one year in seconds"};
  if (!s.checkpoint_from.empty() && !job_id::parse(s.checkpoint_from))
    return failure{"checkpoint_from: '" + s.checkpoint_from
                   + "' is not a job id (monkey jobs lists them; give the whole id)"};
  if (s.ship.size() > 64)
    return failure{"ship: more than 64 bundles"};
  for (auto& b : s.ship) {
    if (b.kind != "workdir" && b.kind != "data")
      return failure{"ship: kind '" + b.kind + "' is neither workdir nor data"};
    if (b.sha256.size() != 64
        || b.sha256.find_first_not_of("0123456789abcdef") != std::string::npos)
      return failure{"ship: '" + b.sha256 + "' is not a SHA-256 (64 hex digits)"};
    if (!ship::safe_path(b.into) || (b.kind == "workdir" && b.into != "work")
        || (!b.cwd.empty() && !ship::safe_path(b.cwd)))
      return failure{"ship: '" + b.into + "' is not a place in the scratch directory"};
  }
  if (!s.ship.empty() && !s.app.empty())
    return failure{"ship: apps are installed on each node (--app-dir); shipping is for "
                   "command jobs"};
  if (s.priority < -1000000 || s.priority > 1000000)
    return failure{"priority: must be between -1000000 and 1000000"};
  if (s.name.size() > 256)
    return failure{"name: longer than 256 characters"};
  if (!(s.retry_backoff_s >= 0) || !(s.retry_backoff_max_s >= 0) || s.retry_backoff_s > 86400
      || s.retry_backoff_max_s > 86400)
    return failure{"retry_backoff: waits from 0 to 1 day"};
  for (auto& d : s.after) {
    if (d.kind != "ok" && d.kind != "any")
      return failure{"after: dependency kind must be ok or any, got '" + d.kind + "'"};
    if (d.job.empty())
      return failure{"after: empty job id"};
  }
  std::set<std::string> env_names;
  for (auto& [k, v] : s.params) {
    if (k.empty())
      return failure{"params: empty parameter name"};
    if (!env_names.insert(param_env_name(k)).second)
      return failure{"params: '" + k + "' collides with another parameter as " + param_env_name(k)};
  }
  for (auto& [k, v] : s.env)
    if (k.empty() || k.find('=') != std::string::npos)
      return failure{"env: invalid variable name '" + k + "'"};
  if (!s.array.empty()) {
    auto idx = expand_array(s.array);
    if (!idx)
      return failure{"array: " + idx.error()};
  }
  if (auto sub = substitute_params(s); !sub)
    return failure{"command: " + sub.error()};
  return {};
}

namespace {

bool parse_int(std::string_view text, long& out) {
  if (text.empty() || text.size() > 9)
    return false;
  long v = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return false;
    v = v * 10 + (c - '0');
  }
  out = v;
  return true;
}

} // namespace

expected<std::vector<int32_t>> expand_array(const std::string& expr) {
  constexpr size_t max_elements = 100000;
  std::vector<int32_t> out;
  std::set<int32_t> seen;
  size_t pos = 0;
  while (pos <= expr.size()) {
    auto comma = expr.find(',', pos);
    auto part = std::string_view(expr).substr(pos, comma == std::string::npos ? std::string::npos
                                                                               : comma - pos);
    long lo = 0, hi = 0, step = 1;
    auto colon = part.find(':');
    auto range = part.substr(0, colon);
    if (colon != std::string_view::npos && (!parse_int(part.substr(colon + 1), step) || step < 1))
      return failure{"bad step in '" + std::string(part) + "'"};
    auto dash = range.find('-');
    if (dash == std::string_view::npos) {
      if (!parse_int(range, lo))
        return failure{"'" + std::string(part) + "' is not an index or a range like 0-99"};
      hi = lo;
    } else if (!parse_int(range.substr(0, dash), lo) || !parse_int(range.substr(dash + 1), hi)) {
      return failure{"'" + std::string(part) + "' is not a range like 0-99"};
    }
    if (hi < lo)
      return failure{"range '" + std::string(part) + "' ends before it starts"};
    for (long i = lo; i <= hi; i += step) {
      if (seen.insert(static_cast<int32_t>(i)).second)
        out.push_back(static_cast<int32_t>(i));
      if (out.size() > max_elements)
        return failure{"more than " + std::to_string(max_elements) + " elements"};
    }
    if (comma == std::string::npos)
      break;
    pos = comma + 1;
  }
  if (out.empty())
    return failure{"no elements"};
  return out;
}

namespace {

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_'))
    return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'))
      return false;
  return true;
}

} // namespace

expected<std::vector<std::string>> substitute_params(const job_spec& spec) {
  // `{name}` is a placeholder when `name` is an identifier; `${name}` (shell) and other
  // braces stay literal; `{{` and `}}` are literal braces. An identifier that names no
  // parameter is an error only when the job has parameters (a likely typo).
  std::vector<std::string> out;
  out.reserve(spec.command.size());
  for (auto& arg : spec.command) {
    std::string res;
    for (size_t i = 0; i < arg.size(); ++i) {
      char c = arg[i];
      if ((c == '{' || c == '}') && i + 1 < arg.size() && arg[i + 1] == c) {
        res += c;
        ++i;
        continue;
      }
      auto end = c == '{' ? arg.find('}', i) : std::string::npos;
      auto name = end == std::string::npos ? std::string{} : arg.substr(i + 1, end - i - 1);
      if (c != '{' || (i > 0 && arg[i - 1] == '$') || !is_identifier(name)) {
        res += c;
        continue;
      }
      auto it = spec.params.find(name);
      if (it != spec.params.end())
        res += it->second;
      else if (name == "array_index" && spec.array_index >= 0)
        res += std::to_string(spec.array_index);
      else if (name == "array_index" || spec.params.empty())
        res += arg.substr(i, end - i + 1); // filled in per element, or no parameters at all
      else
        return failure{"placeholder {" + name + "} names no parameter (parameters: "
                       + [&] {
                           std::string names;
                           for (auto& [k, v] : spec.params)
                             names += (names.empty() ? "" : ", ") + k;
                           return names;
                         }()
                       + "; write {{" + name + "}} for literal braces)"};
      i = end;
    }
    out.push_back(std::move(res));
  }
  return out;
}

double retry_delay_s(const job_spec& spec, int32_t k) {
  if (spec.retry_backoff_s <= 0 || k < 1)
    return 0;
  double d = spec.retry_backoff_s;
  for (int32_t i = 1; i < k && d < spec.retry_backoff_max_s; ++i)
    d *= 2;
  return std::min(d, std::max(spec.retry_backoff_max_s, spec.retry_backoff_s));
}

std::string display_name(const job_spec& spec) {
  // `{param}` and `{array_index}` in the name are filled as in the command ("sweep-lr{lr}"
  // → "sweep-lr0.1"); anything else stays as written.
  std::string base;
  bool indexed = false;
  for (size_t i = 0; i < spec.name.size(); ++i) {
    auto end = spec.name[i] == '{' ? spec.name.find('}', i) : std::string::npos;
    auto key = end == std::string::npos ? std::string{} : spec.name.substr(i + 1, end - i - 1);
    auto it = spec.params.find(key);
    if (it != spec.params.end()) {
      base += it->second;
      i = end;
    } else if (key == "array_index" && spec.array_index >= 0) {
      base += std::to_string(spec.array_index);
      indexed = true;
      i = end;
    } else {
      base += spec.name[i];
    }
  }
  if (base.empty() && !spec.app.empty())
    base = spec.app;
  if (base.empty() && !spec.command.empty()) {
    base = spec.command[0];
    if (auto slash = base.rfind('/'); slash != std::string::npos)
      base = base.substr(slash + 1);
  }
  if (spec.array_index >= 0 && !indexed)
    base += "[" + std::to_string(spec.array_index) + "]";
  return base;
}

bool parse_metric_line(std::string_view line, std::vector<std::pair<std::string, double>>& out) {
  constexpr std::string_view tag = "MONKEY_METRIC";
  if (line.substr(0, tag.size()) != tag)
    return false;
  if (line.size() > tag.size() && line[tag.size()] != ' ' && line[tag.size()] != '\t')
    return false;
  size_t pos = tag.size();
  bool any = false;
  while (pos < line.size()) {
    while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t' || line[pos] == '\r'))
      ++pos;
    if (pos >= line.size())
      break;
    auto end = line.find_first_of(" \t\r", pos);
    auto tok = line.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    pos = end == std::string_view::npos ? line.size() : end;
    auto eq = tok.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq > 64)
      continue;
    std::string val(tok.substr(eq + 1));
    char* stop = nullptr;
    errno = 0;
    double v = std::strtod(val.c_str(), &stop);
    if (val.empty() || *stop != '\0' || errno == ERANGE)
      continue;
    out.emplace_back(std::string(tok.substr(0, eq)), v);
    any = true;
  }
  return any;
}

bool parse_checkpoint_line(std::string_view line, int64_t& step) {
  constexpr std::string_view tag = "MONKEY_CHECKPOINT";
  if (line.substr(0, tag.size()) != tag)
    return false;
  auto rest = line.substr(tag.size());
  if (!rest.empty() && rest[0] != ' ' && rest[0] != '\t' && rest[0] != '\r')
    return false;
  step = -1;
  std::string fake = "MONKEY_METRIC" + std::string(rest);
  std::vector<std::pair<std::string, double>> kv;
  parse_metric_line(fake, kv);
  for (auto& [k, v] : kv)
    if (k == "step" && v >= 0 && v < 9.2e18)
      step = static_cast<int64_t>(v);
  return true;
}

std::string ship_store_entry(const std::string& sha256) {
  return "ship-" + sha256;
}

std::vector<std::string> store_entries_of(const job_record& rec) {
  std::vector<std::string> out{rec.id.str()};
  if (auto from = job_id::parse(rec.spec.checkpoint_from))
    out.push_back(from->str());
  for (auto& s : rec.spec.ship)
    out.push_back(ship_store_entry(s.sha256));
  // Its uncommitted diff, stored once in the cluster (provenance.hpp: diff_is_stored).
  auto& p = rec.spec.provenance;
  if (auto st = p.find("git_diff_stored"), sha = p.find("git_diff_sha256");
      st != p.end() && st->second == "yes" && sha != p.end())
    out.push_back(ship_store_entry(sha->second));
  return out;
}

} // namespace monkey
