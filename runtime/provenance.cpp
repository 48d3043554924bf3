// SPDX-License-Identifier: Apache-2.0
#include "runtime/provenance.hpp"

#include <array>
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

provenance_map collect_provenance(const std::string& workdir,
                                  const std::vector<std::string>& command) {
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
      if (diff.size() > max_recorded_diff) {
        diff.resize(max_recorded_diff);
        p["git_diff_truncated"] = "yes";
      }
      p["git_diff"] = diff;
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
