// SPDX-License-Identifier: Apache-2.0
#include "runtime/apps/catalog.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "runtime/apps/schema.hpp"
#include "runtime/ids.hpp"

extern char** environ;

namespace monkey {

namespace {

constexpr const char* prefix = "monkey-app-";
constexpr size_t max_description = 1 << 20;
constexpr int describe_timeout_ms = 10000;

/// Runs `path --describe`; its stdout, or a failure naming what went wrong.
expected<std::string> describe(const std::string& path) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return failure{"pipe failed"};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  std::string arg0 = path, arg1 = "--describe";
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, path.c_str(), &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return failure{std::string("cannot run it: ") + std::strerror(rc)};
  }
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(describe_timeout_ms);
  bool timed_out = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0)
      continue;
    char buf[65536];
    auto n = ::read(fds[0], buf, sizeof(buf));
    if (n <= 0)
      break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_description)
      break;
  }
  ::close(fds[0]);
  if (timed_out)
    ::kill(pid, SIGKILL);
  int ws = 0;
  ::waitpid(pid, &ws, 0);
  if (timed_out)
    return failure{"--describe did not finish within " + std::to_string(describe_timeout_ms / 1000)
                   + " s"};
  if (out.size() > max_description)
    return failure{"--describe printed more than 1 MB"};
  if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
    return failure{"--describe failed (" + std::string(WIFEXITED(ws) ? "exit "
                     + std::to_string(WEXITSTATUS(ws)) : "killed by signal "
                     + std::to_string(WTERMSIG(ws))) + ")"};
  return out;
}

} // namespace

std::string file_build_hash(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return "";
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  char buf[1 << 16];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0)
    EVP_DigestUpdate(ctx, buf, static_cast<size_t>(n));
  ::close(fd);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx, md, &len);
  EVP_MD_CTX_free(ctx);
  if (n < 0)
    return "";
  return to_hex(std::string(reinterpret_cast<const char*>(md), std::min(len, 8u)));
}

app_scan scan_app_dir(const std::string& dir) {
  app_scan scan;
  DIR* d = ::opendir(dir.c_str());
  if (!d)
    return scan;
  std::vector<std::string> names;
  while (auto* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n.rfind(prefix, 0) == 0 && n.size() > std::strlen(prefix))
      names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (auto& n : names) {
    auto path = dir + "/" + n;
    struct stat sb {};
    if (::stat(path.c_str(), &sb) != 0 || !S_ISREG(sb.st_mode) || ::access(path.c_str(), X_OK) != 0)
      continue;
    auto text = describe(path);
    if (!text) {
      scan.problems.push_back(n + ": " + text.error());
      continue;
    }
    auto schema = parse_app_schema(*text);
    if (!schema) {
      scan.problems.push_back(n + ": " + schema.error());
      continue;
    }
    if (schema->app != n.substr(std::strlen(prefix))) {
      scan.problems.push_back(n + ": it describes itself as app '" + schema->app
                              + "' (the file must be named monkey-app-" + schema->app + ")");
      continue;
    }
    found_app f;
    f.path = path;
    f.entry.name = schema->app;
    f.entry.build = file_build_hash(path);
    f.entry.schema = *text;
    scan.apps.push_back(std::move(f));
  }
  return scan;
}

} // namespace monkey
