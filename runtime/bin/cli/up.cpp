// SPDX-License-Identifier: Apache-2.0
#include "runtime/bin/cli/up.hpp"

#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string_view>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/net/auth.hpp"
#include "runtime/net/certs.hpp"
#include "runtime/client/client.hpp"
#include "runtime/process/proc.hpp"

namespace monkey {

namespace {

using json = nlohmann::json;

struct up_node {
  std::string name;
  std::string data_dir;
  std::string address;
  int pid = 0;
  std::vector<std::string> args; ///< its monkey-runtime options, but --join (for --restart)
};

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.pop_back();
  return s;
}

/// True when `pid` is a live (not zombie) monkey-runtime.
bool runtime_alive(int pid) {
  if (pid <= 0)
    return false;
  auto cmd = read_text("/proc/" + std::to_string(pid) + "/cmdline");
  if (cmd.find("monkey-runtime") == std::string::npos)
    return false;
  auto stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  return close != std::string::npos && stat.size() > close + 2 && stat[close + 2] != 'Z';
}

/// Starts one runtime in its own session, its output in DATA_DIR/stderr.log.
expected<int> start_runtime(const std::string& exe, const std::vector<std::string>& args,
                            const std::string& log_path) {
  int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0)
    return failure{"cannot open " + log_path + ": " + std::strerror(errno)};
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fd);
    return failure{std::string("fork: ") + std::strerror(errno)};
  }
  if (pid == 0) {
    ::setsid();
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execv(exe.c_str(), argv.data());
    std::fprintf(stderr, "monkey up: cannot run %s: %s\n", exe.c_str(), std::strerror(errno));
    ::_exit(127);
  }
  ::close(fd);
  return static_cast<int>(pid);
}

std::vector<up_node> read_up_file(const std::string& path) {
  std::vector<up_node> out;
  std::ifstream in(path);
  if (!in)
    return out;
  try {
    auto j = json::parse(in);
    for (auto& n : j.at("nodes"))
      out.push_back({n.at("name"), n.at("data_dir"), n.at("address"), n.at("pid"),
                     n.value("args", std::vector<std::string>{})});
  } catch (const std::exception&) {
  }
  return out;
}

void write_up_file(const std::string& path, const std::vector<up_node>& nodes) {
  json arr = json::array();
  for (auto& n : nodes)
    arr.push_back({{"name", n.name}, {"data_dir", n.data_dir}, {"address", n.address},
                   {"pid", n.pid}, {"args", n.args}});
  std::ofstream(path + ".tmp") << json{{"nodes", arr}}.dump(2) << "\n";
  std::rename((path + ".tmp").c_str(), path.c_str());
}

/// How many members `address` sees alive, or a failure.
expected<size_t> alive_seen(const std::string& address, const std::string& secret) {
  auto c = client::connect({address}, credentials{client_token(secret)});
  if (!c)
    return failure{c.error()};
  auto r = (*c)->call<nodes_reply>(verb::nodes, std::string{}, std::chrono::seconds(5));
  if (!r)
    return failure{r.error()};
  size_t alive = 0;
  for (auto& m : r->members)
    alive += m.state == member_state::alive ? 1 : 0;
  return alive;
}

int fail(const std::string& msg, int code = 1) {
  std::fprintf(stderr, "monkey: %s\n", msg.c_str());
  return code;
}

using up_clock = std::chrono::steady_clock;

/// Starts node `i` of a `monkey up` cluster (joining through `seed` unless it is the first).
expected<up_node> start_up_node(const up_options& opt, const std::string& exe, int i, int cpus,
                                const std::string& seed, const std::string& tls_dir) {
  auto home = monkey_home();
  up_node n;
  n.name = "n" + std::to_string(i + 1);
  n.data_dir = home + "/nodes/" + n.name;
  ::mkdir(n.data_dir.c_str(), 0700);
  ::unlink((n.data_dir + "/address").c_str());
  std::vector<std::string> args{"--listen", "127.0.0.1:0", "--data-dir", n.data_dir,
                                "--name",   n.name,        "--cpus",     std::to_string(cpus)};
  auto add = [&](bool when, const char* flag, const std::string& value) {
    if (when) {
      args.push_back(flag);
      args.push_back(value);
    }
  };
  if (opt.no_measure)
    args.push_back("--no-measure");
  add(!tls_dir.empty(), "--tls-dir", tls_dir);
  add(!opt.secret_file.empty(), "--secret-file", opt.secret_file);
  args.insert(args.end(), opt.runtime_args.begin(), opt.runtime_args.end());
  n.args = args;
  add(!seed.empty(), "--join", seed);
  auto pid = start_runtime(exe, args, n.data_dir + "/stderr.log");
  if (!pid)
    return failure{pid.error()};
  n.pid = *pid;
  return n;
}

/// Waits until node `n` has written its address (it listens), or exited, or the deadline.
status wait_address(up_node& n, up_clock::time_point deadline) {
  while (up_clock::now() < deadline) {
    auto a = read_text(n.data_dir + "/address");
    if (!a.empty()) {
      n.address = a;
      return {};
    }
    int status = 0;
    if (::waitpid(n.pid, &status, WNOHANG) == n.pid)
      return failure{"node " + n.name + " exited at start: "
                     + read_text(n.data_dir + "/stderr.log")};
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return failure{"node " + n.name + " did not start listening in time"};
}

/// Waits until every node sees all of them alive.
status wait_all_alive(const std::vector<up_node>& nodes, const std::string& secret,
                      up_clock::time_point deadline, double timeout_s) {
  std::string last;
  for (;;) {
    size_t ready = 0;
    for (auto& n : nodes) {
      auto seen = alive_seen(n.address, secret);
      if (seen && *seen == nodes.size())
        ++ready;
      else
        last = n.name + " sees " + (seen ? std::to_string(*seen) + " alive" : seen.error());
    }
    if (ready == nodes.size())
      return {};
    if (up_clock::now() >= deadline)
      return failure{"not every node sees " + std::to_string(nodes.size()) + " alive within "
                     + std::to_string(static_cast<int>(timeout_s)) + " s: " + last};
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void print_up(const std::vector<up_node>& nodes, bool as_json, int cpus, bool tls,
              const std::string& home) {
  if (as_json) {
    json arr = json::array();
    for (auto& n : nodes)
      arr.push_back({{"name", n.name}, {"address", n.address}, {"pid", n.pid},
                     {"data_dir", n.data_dir}});
    std::cout << json{{"nodes", arr}}.dump() << "\n";
    return;
  }
  std::printf("%-6s %-22s %8s  %s\n", "NODE", "ADDRESS", "PID", "DATA");
  for (auto& n : nodes)
    std::printf("%-6s %-22s %8d  %s\n", n.name.c_str(), n.address.c_str(), n.pid,
                n.data_dir.c_str());
  std::printf("%zu nodes up, each sees %zu alive (%d cpus each%s); cluster file %s/cluster\n",
              nodes.size(), nodes.size(), cpus, tls ? ", TLS" : "", home.c_str());
}

/// The certificates of a `monkey up --tls` cluster (made when missing); "" without TLS.
expected<std::string> up_tls_dir(const up_options& opt, const std::string& home) {
  ::unlink((home + "/cluster.tls").c_str());
  if (!opt.tls)
    return std::string{};
  auto dir = home + "/certs";
  auto made = make_certs({dir, {"node", "client"}, 825, false});
  if (!made)
    return failure{made.error()};
  // Plain `monkey ...` commands find the certificates through this file.
  std::ofstream(home + "/cluster.tls") << dir << "\n";
  return dir;
}

/// Whether process `pid` has a file open in directory `dir` (a runtime keeps its journal
/// open): tells a node's runtime from an unrelated one that reused a stale pid.
bool holds_files_in(int pid, const std::string& dir) {
  char real[PATH_MAX];
  if (!::realpath(dir.c_str(), real))
    return false;
  std::string prefix = std::string(real) + "/";
  auto fds = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = ::opendir(fds.c_str());
  if (!d)
    return false;
  bool found = false;
  while (auto* e = ::readdir(d)) {
    char target[PATH_MAX];
    auto n = ::readlink((fds + "/" + e->d_name).c_str(), target, sizeof(target) - 1);
    std::string_view path(target, n > 0 ? static_cast<size_t>(n) : 0);
    if (path.substr(0, prefix.size()) == prefix) {
      found = true;
      break;
    }
  }
  ::closedir(d);
  return found;
}

/// The runtime of node `n` now: the one whose pid its data directory holds (a node restarted
/// by hand on the same directory writes its own), else the one `up` started; 0 if neither runs.
int running_pid(const up_node& n) {
  int pid = std::atoi(read_text(n.data_dir + "/pid").c_str());
  if (pid != n.pid && runtime_alive(pid) && holds_files_in(pid, n.data_dir))
    return pid;
  return runtime_alive(n.pid) ? n.pid : 0;
}

/// The address list plain `monkey ...` commands find the cluster by.
void write_cluster_file(const std::string& home, const std::vector<up_node>& nodes) {
  std::string addresses;
  for (auto& n : nodes)
    addresses += (addresses.empty() ? "" : ",") + n.address;
  std::ofstream(home + "/cluster") << addresses << "\n";
}

/// `monkey up --restart NAME`: starts node NAME of the cluster again on its data directory,
/// with the options it had, joining through the nodes that run.
int cluster_restart(const up_options& opt) {
  auto home = monkey_home();
  auto up_path = home + "/up.json";
  auto nodes = read_up_file(up_path);
  if (nodes.empty())
    return fail("up --restart: no cluster started by `monkey up` under " + home);
  up_node* target = nullptr;
  std::string names, seeds;
  for (auto& n : nodes) {
    names += (names.empty() ? "" : ", ") + n.name;
    if (n.name == opt.restart)
      target = &n;
    else if (running_pid(n) != 0)
      seeds += (seeds.empty() ? "" : ",") + n.address;
  }
  if (!target)
    return fail("up --restart: no node '" + opt.restart + "' in this cluster (nodes: " + names
                + ")", 2);
  if (int pid = running_pid(*target); pid != 0)
    return fail("up --restart: node " + target->name + " is running (pid " + std::to_string(pid)
                + "); `monkey drain " + target->name + "` stops it first");
  if (target->args.empty())
    return fail("up --restart: up.json does not have node " + target->name
                + "'s options (it was written by an older monkey): `monkey down`, then `monkey up`");
  auto exe = self_dir() + "/monkey-runtime";
  auto args = target->args;
  if (!seeds.empty()) {
    args.push_back("--join");
    args.push_back(seeds);
  }
  ::unlink((target->data_dir + "/address").c_str());
  auto pid = start_runtime(exe, args, target->data_dir + "/stderr.log");
  if (!pid)
    return fail("up --restart: " + pid.error());
  target->pid = *pid;
  auto deadline = up_clock::now()
                  + std::chrono::milliseconds(static_cast<int64_t>(opt.timeout_s * 1000));
  if (auto e = wait_address(*target, deadline); !e)
    return fail("up --restart: " + e.error());
  write_up_file(up_path, nodes);
  write_cluster_file(home, nodes);
  std::vector<up_node> running;
  for (auto& n : nodes)
    if (running_pid(n) != 0)
      running.push_back(n);
  auto secret_path = opt.secret_file.empty() ? find_secret_file("") : opt.secret_file;
  auto secret = load_secret(secret_path, false);
  if (!secret)
    return fail("up --restart: " + secret.error());
  if (auto e = wait_all_alive(running, *secret, deadline, opt.timeout_s); !e)
    return fail("up --restart: " + e.error());
  if (opt.json) {
    std::cout << json{{"name", target->name}, {"address", target->address}, {"pid", target->pid},
                      {"data_dir", target->data_dir}}.dump()
              << "\n";
    return 0;
  }
  std::printf("restarted %s at %s (pid %d, data %s); %zu nodes running, each sees all alive\n",
              target->name.c_str(), target->address.c_str(), target->pid,
              target->data_dir.c_str(), running.size());
  return 0;
}

} // namespace

int cluster_up(const up_options& opt) {
  if (!opt.restart.empty())
    return cluster_restart(opt);
  if (opt.nodes < 1 || opt.nodes > 256)
    return fail("up: the number of nodes must be between 1 and 256", 2);
  auto home = monkey_home();
  ::mkdir(home.c_str(), 0700);
  auto up_path = home + "/up.json";
  for (auto& n : read_up_file(up_path))
    if (runtime_alive(n.pid))
      return fail("up: a cluster is already up under " + home + " (node " + n.name + ", pid "
                  + std::to_string(n.pid) + "); run `monkey down` first");
  auto exe = self_dir() + "/monkey-runtime";
  if (::access(exe.c_str(), X_OK) != 0)
    return fail("up: cannot find monkey-runtime next to monkey (" + exe + ")");
  int cpus = opt.cpus > 0
               ? opt.cpus
               : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / opt.nodes);
  ::mkdir((home + "/nodes").c_str(), 0755);
  auto tls_dir = up_tls_dir(opt, home);
  if (!tls_dir)
    return fail("up: " + tls_dir.error());
  std::vector<up_node> nodes;
  auto give_up = [&](const std::string& why) {
    write_up_file(up_path, nodes); // `monkey down` can still stop what started
    return fail("up: " + why + " (see " + home + "/nodes/*/runtime.log; `monkey down` stops "
                "what started)");
  };
  auto deadline = up_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(opt.timeout_s * 1000));
  // The first node starts alone; the others join through it.
  for (int i = 0; i < opt.nodes; ++i) {
    auto n = start_up_node(opt, exe, i, cpus, i == 0 ? "" : nodes[0].address, *tls_dir);
    if (!n)
      return give_up(n.error());
    nodes.push_back(*n);
    if (i == 0)
      if (auto e = wait_address(nodes[0], deadline); !e)
        return give_up(e.error());
  }
  for (auto& n : nodes)
    if (auto e = wait_address(n, deadline); !e)
      return give_up(e.error());
  write_up_file(up_path, nodes);
  write_cluster_file(home, nodes);
  auto secret_path = opt.secret_file.empty() ? find_secret_file("") : opt.secret_file;
  auto secret = load_secret(secret_path, false);
  if (!secret)
    return give_up(secret.error());
  if (auto e = wait_all_alive(nodes, *secret, deadline, opt.timeout_s); !e)
    return give_up(e.error());
  print_up(nodes, opt.json, cpus, !tls_dir->empty(), home);
  return 0;
}

int cluster_down(double grace_s) {
  auto home = monkey_home();
  auto up_path = home + "/up.json";
  auto nodes = read_up_file(up_path);
  if (nodes.empty())
    return fail("down: no cluster started by `monkey up` under " + home);
  size_t running = 0;
  for (auto& n : nodes) {
    n.pid = running_pid(n);
    if (n.pid == 0)
      continue;
    ++running;
    ::kill(n.pid, SIGCONT); // a stopped node cannot act on SIGTERM
    ::kill(n.pid, SIGTERM);
  }
  auto deadline = std::chrono::steady_clock::now()
                  + std::chrono::milliseconds(static_cast<int64_t>(grace_s * 1000));
  bool killed = false;
  for (;;) {
    size_t left = 0;
    for (auto& n : nodes)
      left += runtime_alive(n.pid) ? 1 : 0;
    if (left == 0)
      break;
    if (!killed && std::chrono::steady_clock::now() >= deadline) {
      for (auto& n : nodes)
        if (runtime_alive(n.pid))
          ::kill(n.pid, SIGKILL);
      killed = true;
      deadline += std::chrono::seconds(10);
    } else if (killed && std::chrono::steady_clock::now() >= deadline) {
      return fail("down: " + std::to_string(left) + " nodes did not stop");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::unlink(up_path.c_str());
  ::unlink((home + "/cluster").c_str());
  ::unlink((home + "/cluster.tls").c_str());
  auto gone = nodes.size() - running;
  std::printf("%zu node%s stopped%s%s\n", running, running == 1 ? "" : "s",
              gone ? (", " + std::to_string(gone) + " already not running").c_str() : "",
              killed ? " (some needed SIGKILL after the grace period)" : "");
  return 0;
}

} // namespace monkey
