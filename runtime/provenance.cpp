// SPDX-License-Identifier: Apache-2.0
#include "runtime/provenance.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <set>
#include <tuple>
#include <cstdio>
#include <sys/wait.h>

#include <openssl/sha.h>

#include "monkey/sdk/version.hpp"
#include "runtime/shell.hpp"

namespace monkey {

namespace {

/// What one git or --version call may return (a diff larger than this is cut).
constexpr size_t max_output = 64 * 1024 * 1024;

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' '))
    s.pop_back();
  return s;
}

} // namespace

std::string share_schedule_of(std::vector<metric_point> points, int32_t workers) {
  if (workers < 1)
    return "";
  std::stable_sort(points.begin(), points.end(), [](const metric_point& a, const metric_point& b) {
    return std::make_tuple(a.attempt, a.step, a.ts_ms) < std::make_tuple(b.attempt, b.step, b.ts_ms);
  });
  // rank → step → rows; a later attempt replaces the timeline from its first step on.
  std::vector<std::map<int64_t, int>> by_rank(static_cast<size_t>(workers));
  for (size_t i = 0; i < points.size();) {
    auto attempt = points[i].attempt;
    auto first = points[i].step;
    for (auto& t : by_rank)
      t.erase(t.lower_bound(first), t.end());
    for (; i < points.size() && points[i].attempt == attempt; ++i) {
      auto& p = points[i];
      if (p.rank >= 0 && p.rank < workers && p.value >= 1 && p.value <= 1e9)
        by_rank[static_cast<size_t>(p.rank)][p.step] = static_cast<int>(p.value);
    }
  }
  std::set<int64_t> steps;
  for (auto& t : by_rank)
    for (auto& [step, rows] : t)
      steps.insert(step);
  std::string out, last;
  bool uneven = false;
  int batch = -1; // the first complete split's total: every entry must add up to it
  for (auto step : steps) {
    std::string entry;
    int total = 0;
    std::vector<int> rows;
    for (auto& t : by_rank) {
      auto it = t.upper_bound(step);
      if (it == t.begin())
        return ""; // a worker without a share yet: nothing sound to replay
      rows.push_back(std::prev(it)->second);
      total += rows.back();
      entry += (entry.empty() ? "" : "/") + std::to_string(rows.back());
    }
    if (batch < 0)
      batch = total;
    if (total != batch)
      continue; // mid-change: some workers' new shares, others' old ones
    for (int r : rows)
      uneven = uneven || std::abs(r - rows.front()) > 1;
    if (entry == last)
      continue;
    out += (out.empty() ? "" : ";") + std::to_string(step) + ":" + entry;
    last = entry;
  }
  return uneven ? out : "";
}

std::string sha256_hex(const std::string& data) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), md);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : md) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}

void keep_diff_inline(provenance_map& p, std::string diff) {
  if (diff.size() > max_recorded_diff) {
    diff.resize(max_recorded_diff);
    p["git_diff_truncated"] = "yes";
  }
  p["git_diff"] = std::move(diff);
}

bool diff_is_stored(const provenance_map& p) {
  auto it = p.find("git_diff_stored");
  return it != p.end() && it->second == "yes" && p.count("git_diff_sha256");
}

provenance_map collect_provenance(const std::string& workdir,
                                  const std::vector<std::string>& command,
                                  std::string* whole_diff) {
  provenance_map p;
  p["monkey_version"] = MONKEY_VERSION;
  std::string out;
  auto git = "git -C " + shell_quoted(workdir.empty() ? "." : workdir) + " ";
  if (capture_output(git + "rev-parse HEAD", out, max_output)) {
    p["git_commit"] = trimmed(out);
    std::string diff;
    // Tracked changes against HEAD, then untracked files' names (their content is not kept).
    capture_output(git + "diff HEAD --binary", diff, max_output);
    std::string untracked;
    capture_output(git + "ls-files --others --exclude-standard", untracked, max_output);
    if (!untracked.empty())
      diff += "# untracked files:\n" + untracked;
    p["git_dirty"] = diff.empty() ? "no" : "yes";
    if (!diff.empty()) {
      p["git_diff_sha256"] = sha256_hex(diff);
      if (whole_diff)
        *whole_diff = std::move(diff);
      else
        keep_diff_inline(p, std::move(diff));
    }
  }
  if (!command.empty() && command.front().find("python") != std::string::npos
      && capture_output(shell_quoted(command.front()) + " --version", out, max_output))
    p["python"] = trimmed(out);
  return p;
}

std::vector<std::string> provenance_changes(const provenance_map& then,
                                            const provenance_map& now) {
  std::vector<std::string> out;
  auto get = [](const provenance_map& m, const char* k) {
    auto it = m.find(k);
    return it == m.end() ? std::string{} : it->second;
  };
  auto commit = get(then, "git_commit"), commit_now = get(now, "git_commit");
  if (!commit.empty() && commit_now.empty())
    out.push_back("code: the working directory is no longer a git tree (it ran at commit "
                  + commit.substr(0, 12) + ")");
  else if (!commit.empty() && commit != commit_now)
    out.push_back("code changed: it ran at commit " + commit.substr(0, 12) + ", the working "
                  "directory is at " + commit_now.substr(0, 12));
  if (!commit.empty() && !commit_now.empty()) {
    auto dirty = get(then, "git_dirty") == "yes", dirty_now = get(now, "git_dirty") == "yes";
    if (dirty && !dirty_now)
      out.push_back("code: it ran with uncommitted changes that are gone now (`monkey "
                    "reproduce ID --diff` prints them)");
    else if (!dirty && dirty_now)
      out.push_back("code: the working directory has uncommitted changes it did not have");
    else if (dirty && get(then, "git_diff_sha256") != get(now, "git_diff_sha256"))
      out.push_back("code: the uncommitted changes differ from the ones it ran with (diff "
                    "sha256 " + get(then, "git_diff_sha256").substr(0, 12) + " then, "
                    + get(now, "git_diff_sha256").substr(0, 12) + " now)");
  }
  auto v = get(then, "monkey_version"), v_now = get(now, "monkey_version");
  if (!v.empty() && v != v_now)
    out.push_back("monkey version: " + v + " then, " + v_now + " now");
  auto py = get(then, "python"), py_now = get(now, "python");
  if (!py.empty() && py != py_now)
    out.push_back("python: " + py + " then, " + (py_now.empty() ? "none found" : py_now) + " now");
  return out;
}

} // namespace monkey
