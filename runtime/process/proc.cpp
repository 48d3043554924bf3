// SPDX-License-Identifier: Apache-2.0
#include "runtime/process/proc.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <netinet/in.h>
#include <sstream>
#include <sys/socket.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace monkey {

namespace {

// Splits /proc/PID/stat after the command name, which may contain spaces and ')'.
bool read_stat(int pid, std::vector<std::string>& fields) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line))
    return false;
  auto close = line.rfind(')');
  if (close == std::string::npos)
    return false;
  std::istringstream rest(line.substr(close + 2));
  fields.clear();
  fields.push_back(line.substr(0, close + 1)); // fields 1-2
  std::string f;
  while (rest >> f)
    fields.push_back(f);
  return fields.size() > 20;
}

bool write_file(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

} // namespace

uint64_t proc_start_ticks(int pid) {
  std::vector<std::string> f;
  // fields[0] = "pid (comm)", fields[1] = state (field 3) → field N is fields[N - 2].
  if (pid <= 0 || !read_stat(pid, f))
    return 0;
  return std::stoull(f[20]);
}

std::vector<int> pids_in_group(int pgid, uint64_t min_start_ticks) {
  std::vector<int> out;
  DIR* d = ::opendir("/proc");
  if (!d)
    return out;
  while (auto* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0)
      continue;
    std::vector<std::string> f;
    if (!read_stat(static_cast<int>(pid), f))
      continue;
    // fields[1] is the state: zombies are dead already, only not yet reaped.
    if (f[1] != "Z" && std::stoi(f[3]) == pgid && std::stoull(f[20]) >= min_start_ticks)
      out.push_back(static_cast<int>(pid));
  }
  ::closedir(d);
  return out;
}

int signal_job(const std::string& cgroup_dir, int pgid, int sig) {
  int sent = 0;
  if (!cgroup_dir.empty()) {
    if (sig == SIGKILL && write_file(cgroup_dir + "/cgroup.kill", "1")) {
      ++sent;
    } else {
      std::ifstream procs(cgroup_dir + "/cgroup.procs");
      int pid;
      while (procs >> pid)
        if (::kill(pid, sig) == 0)
          ++sent;
    }
  }
  if (pgid > 1 && ::kill(-pgid, sig) == 0)
    ++sent;
  return sent;
}

int kill_leftovers(const std::string& cgroup_dir, int pgid, uint64_t start_ticks) {
  int killed = 0;
  if (!cgroup_dir.empty() && ::access(cgroup_dir.c_str(), F_OK) == 0) {
    std::ifstream procs(cgroup_dir + "/cgroup.procs");
    int pid;
    while (procs >> pid)
      ++killed;
    signal_job(cgroup_dir, 0, SIGKILL);
    cgroup_remove(cgroup_dir);
  }
  if (pgid > 1 && start_ticks > 0) {
    // The group id may have been reused: only processes started no earlier than the
    // journaled leader belong to the old attempt.
    // Rescan until nothing is left: a member may fork between a scan and its kill.
    for (int round = 0; round < 50; ++round) {
      auto pids = pids_in_group(pgid, start_ticks);
      if (pids.empty())
        break;
      for (int pid : pids)
        if (::kill(pid, SIGKILL) == 0 && round == 0)
          ++killed;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  return killed;
}

std::string cgroup_base() {
  // Find a cgroup2 mount and this process's place in it.
  std::ifstream mounts("/proc/self/mountinfo");
  std::string line, mount_point;
  while (std::getline(mounts, line)) {
    auto dash = line.find(" - ");
    if (dash == std::string::npos)
      continue;
    std::istringstream tail(line.substr(dash + 3));
    std::string fstype;
    tail >> fstype;
    if (fstype != "cgroup2")
      continue;
    std::istringstream head(line);
    std::string skip, mp;
    head >> skip >> skip >> skip >> skip >> mp;
    mount_point = mp;
    break;
  }
  if (mount_point.empty())
    return {};
  std::ifstream self("/proc/self/cgroup");
  std::string rel;
  while (std::getline(self, line))
    if (line.rfind("0::", 0) == 0)
      rel = line.substr(3);
  if (rel == "/")
    rel.clear();
  auto base = mount_point + rel;
  if (::access((base + "/cgroup.procs").c_str(), W_OK) != 0)
    return {};
  // Probe: can we make a child group and does it offer cgroup.kill?
  auto probe = base + "/monkey-probe-" + std::to_string(::getpid());
  if (::mkdir(probe.c_str(), 0755) != 0)
    return {};
  bool has_kill = ::access((probe + "/cgroup.kill").c_str(), W_OK) == 0;
  ::rmdir(probe.c_str());
  return has_kill ? base : std::string{};
}

int64_t group_rss_kb(int pgid) {
  if (pgid <= 0)
    return 0;
  static const int64_t page_kb = std::max<long>(1, ::sysconf(_SC_PAGESIZE) / 1024);
  int64_t total = 0;
  for (int pid : pids_in_group(pgid, 0)) {
    std::vector<std::string> f;
    if (read_stat(pid, f) && f.size() > 22)
      total += std::strtoll(f[22].c_str(), nullptr, 10) * page_kb; // field 24: rss pages
  }
  return total;
}

bool cgroup_limit_memory(const std::string& cgroup_dir, int64_t mb) {
  if (cgroup_dir.empty() || mb <= 0)
    return false;
  if (!write_file(cgroup_dir + "/memory.max", std::to_string(mb * 1024 * 1024)))
    return false;
  write_file(cgroup_dir + "/memory.swap.max", "0"); // absent without swap accounting
  return true;
}

bool cgroup_memory_limited(const std::string& cgroup_dir) {
  if (cgroup_dir.empty())
    return false;
  std::ifstream in(cgroup_dir + "/memory.max");
  std::string v;
  return (in >> v) && v != "max";
}

bool cgroup_oom_killed(const std::string& cgroup_dir) {
  if (cgroup_dir.empty())
    return false;
  std::ifstream in(cgroup_dir + "/memory.events");
  std::string key;
  long value;
  while (in >> key >> value)
    if (key == "oom_kill" && value > 0)
      return true;
  return false;
}

void cgroup_remove(const std::string& cgroup_dir) {
  if (cgroup_dir.empty())
    return;
  for (int i = 0; i < 50; ++i) {
    if (::rmdir(cgroup_dir.c_str()) == 0 || errno == ENOENT)
      return;
    if (errno == EBUSY) {
      write_file(cgroup_dir + "/cgroup.kill", "1");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    return;
  }
}

std::string self_executable() {
  char buf[4096];
  auto n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string{};
}

std::string self_dir() {
  auto exe = self_executable();
  auto slash = exe.rfind('/');
  return slash == std::string::npos ? std::string(".") : exe.substr(0, slash);
}

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

int free_tcp_port(const char* ip) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, ip, &a.sin_addr);
  socklen_t len = sizeof(a);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0
      && ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

} // namespace monkey
