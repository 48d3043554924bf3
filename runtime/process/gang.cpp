// SPDX-License-Identifier: Apache-2.0
#include "runtime/process/gang.hpp"

#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/job.hpp"
#include "runtime/process/proc.hpp"

namespace monkey {

namespace {

volatile sig_atomic_t stop_requested = 0;

void on_term(int) {
  stop_requested = 1;
}

int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

struct rank_proc {
  pid_t pid = 0;
  int out = -1;     ///< read end of its stdout+stderr
  FILE* log = nullptr;
  std::string partial;
  int rank = 0;
  bool echo = false; ///< its whole output goes to the runner's stdout (the part's first rank)
  bool reaped = false;
  int status = 0;
};

void write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    auto n = ::write(fd, s.data() + off, s.size() - off);
    if (n <= 0)
      return;
    off += static_cast<size_t>(n);
  }
}

/// Writes the complete lines of `p.partial` on (the echoed rank: all of them; others:
/// metric lines).
void pass_lines(rank_proc& p, bool final_flush) {
  int rank = p.rank;
  size_t start = 0;
  for (;;) {
    auto nl = p.partial.find('\n', start);
    if (nl == std::string::npos)
      break;
    auto line = p.partial.substr(start, nl - start);
    std::string tagged;
    if (tag_metric_line(line, rank, tagged))
      write_all(1, tagged + "\n");
    else if (p.echo)
      write_all(1, line + "\n");
    start = nl + 1;
  }
  p.partial.erase(0, start);
  if ((final_flush || p.partial.size() > 65536) && !p.partial.empty()) {
    if (p.echo)
      write_all(1, p.partial + "\n");
    p.partial.clear();
  }
}

} // namespace

bool tag_metric_line(const std::string& line, int rank, std::string& out) {
  std::vector<std::pair<std::string, double>> kv;
  if (!parse_metric_line(line, kv))
    return false;
  for (auto& [k, v] : kv)
    if (k == "rank") { // the script names its rank itself
      out = line;
      return true;
    }
  out = "MONKEY_METRIC rank=" + std::to_string(rank) + line.substr(std::strlen("MONKEY_METRIC"));
  return true;
}

int run_gang(const std::vector<std::string>& args) {
  auto usage = [] {
    std::fprintf(stderr, "gang: usage: monkey-runtime __gang N [--ranks LIST --group G "
                         "--master HOST:PORT] -- CMD ARGS...\n");
    return 2;
  };
  if (args.size() < 3)
    return usage();
  int n = std::atoi(args[0].c_str());
  if (n < 1 || n > 4096) {
    std::fprintf(stderr, "gang: N must be between 1 and 4096, not '%s'\n", args[0].c_str());
    return 2;
  }
  // A part of a gang that spans nodes: its ranks, its place among the parts (GROUP_RANK)
  // and rank 0's rendezvous; else every rank runs here.
  std::vector<int32_t> mine;
  int group = 0;
  std::string master_addr = "127.0.0.1", master_port;
  size_t i = 1;
  for (; i + 1 < args.size() && args[i] != "--"; i += 2) {
    if (args[i] == "--ranks")
      mine = parse_rank_list(args[i + 1]);
    else if (args[i] == "--group")
      group = std::atoi(args[i + 1].c_str());
    else if (args[i] == "--master") {
      auto colon = args[i + 1].rfind(':');
      if (colon == std::string::npos)
        return usage();
      master_addr = args[i + 1].substr(0, colon);
      master_port = args[i + 1].substr(colon + 1);
    } else {
      return usage();
    }
  }
  if (i >= args.size() || args[i] != "--" || i + 1 >= args.size())
    return usage();
  if (mine.empty())
    for (int r = 0; r < n; ++r)
      mine.push_back(r);
  if (mine.back() >= n) {
    std::fprintf(stderr, "gang: --ranks names ranks beyond N=%d\n", n);
    return 2;
  }
  std::vector<std::string> cmd(args.begin() + static_cast<long>(i) + 1, args.end());
  auto* logs_env = std::getenv("MONKEY_RANK_LOGS");
  std::string log_out = logs_env ? logs_env : "";
  int64_t grace_ms = 10000;
  if (auto* g = std::getenv("MONKEY_KILL_GRACE_MS"); g && *g)
    grace_ms = std::atoll(g);
  auto port = master_port;
  if (port.empty()) {
    auto p = free_tcp_port("127.0.0.1");
    port = std::to_string(p > 0 ? p : 29500);
  }
  struct sigaction sa {};
  sa.sa_handler = on_term;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  auto local_n = static_cast<int>(mine.size());
  std::vector<rank_proc> ranks(mine.size());
  for (int li = 0; li < local_n; ++li) {
    int r = mine[static_cast<size_t>(li)];
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      std::perror("gang: pipe");
      return 1;
    }
    pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(fds[1], 1);
      ::dup2(fds[1], 2);
      auto set = [](const char* k, const std::string& v) { ::setenv(k, v.c_str(), 1); };
      set("RANK", std::to_string(r));
      set("LOCAL_RANK", std::to_string(li));
      set("GROUP_RANK", std::to_string(group));
      set("WORLD_SIZE", std::to_string(n));
      set("LOCAL_WORLD_SIZE", std::to_string(local_n));
      set("MASTER_ADDR", master_addr);
      set("MASTER_PORT", port);
      set("MONKEY_RANK", std::to_string(r));
      std::vector<char*> argv;
      for (auto& a : cmd)
        argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      std::fprintf(stderr, "gang: cannot run %s: %s\n", argv[0], std::strerror(errno));
      ::_exit(127);
    }
    ::close(fds[1]);
    if (pid < 0) {
      std::perror("gang: fork");
      return 1;
    }
    auto& p = ranks[static_cast<size_t>(li)];
    p.pid = pid;
    p.rank = r;
    p.echo = li == 0;
    p.out = fds[0];
    if (!log_out.empty())
      p.log = std::fopen(rank_log_path(log_out, r).c_str(), "a");
  }
  int exit_code = 0;
  int failed_rank = -1;
  int64_t kill_at = 0; // when the stopping ranks get SIGKILL (0: not stopping)
  auto stop_others = [&] {
    if (kill_at != 0)
      return;
    kill_at = steady_ms() + grace_ms;
    // Started by a worker, the runner leads the job's process group: the whole group gets
    // SIGTERM (what the ranks started too; the runner's own handler only takes note).
    if (::getpgrp() == ::getpid())
      ::kill(0, SIGTERM);
    for (auto& p : ranks)
      if (!p.reaped)
        ::kill(p.pid, SIGTERM);
  };
  for (;;) {
    std::vector<pollfd> pfds;
    std::vector<size_t> which;
    for (size_t i = 0; i < ranks.size(); ++i)
      if (ranks[i].out >= 0) {
        pfds.push_back({ranks[i].out, POLLIN, 0});
        which.push_back(i);
      }
    if (!pfds.empty())
      ::poll(pfds.data(), pfds.size(), 200);
    else
      ::usleep(50 * 1000); // output closed, ranks still running: wait for their exit
    for (size_t k = 0; k < pfds.size(); ++k) {
      if (!(pfds[k].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      auto& p = ranks[which[k]];
      char buf[65536];
      auto got = ::read(p.out, buf, sizeof(buf));
      if (got <= 0) {
        ::close(p.out);
        p.out = -1;
        pass_lines(p, true);
        continue;
      }
      if (p.log) {
        std::fwrite(buf, 1, static_cast<size_t>(got), p.log);
        std::fflush(p.log);
      }
      p.partial.append(buf, static_cast<size_t>(got));
      pass_lines(p, false);
    }
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0)
      for (size_t i = 0; i < ranks.size(); ++i) {
        auto& p = ranks[i];
        if (p.pid != pid)
          continue;
        p.reaped = true;
        p.status = status;
        bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!ok && failed_rank < 0 && !stop_requested) {
          failed_rank = p.rank;
          exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          std::fprintf(stderr, "gang: rank %d %s; stopping the other ranks\n", p.rank,
                       WIFEXITED(status)
                         ? ("exited " + std::to_string(WEXITSTATUS(status))).c_str()
                         : ("was killed by signal " + std::to_string(WTERMSIG(status))).c_str());
          stop_others();
        }
      }
    if (stop_requested && kill_at == 0) {
      stop_others();
      if (exit_code == 0)
        exit_code = 128 + SIGTERM;
    }
    if (kill_at != 0 && steady_ms() >= kill_at) {
      for (size_t i = 0; i < ranks.size(); ++i) {
        auto& p = ranks[i];
        if (!p.reaped)
          ::kill(p.pid, SIGKILL);
        // A rank gone, its output still open (something it started holds it): the worker
        // kills what is left of the group once the runner exits.
        if (p.reaped && p.out >= 0) {
          ::close(p.out);
          p.out = -1;
          pass_lines(p, true);
        }
      }
    }
    bool all_done = true;
    for (auto& p : ranks)
      all_done = all_done && p.reaped && p.out < 0;
    if (all_done)
      break;
  }
  for (auto& p : ranks)
    if (p.log)
      std::fclose(p.log);
  return exit_code;
}

} // namespace monkey
