// SPDX-License-Identifier: Apache-2.0
// monkey-runtime: one node of a Monkey cluster. See README.md and docs/architecture.md.

#include <cctype>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "runtime/wire/atoms.hpp"
#include "actors/membership/membership.hpp"
#include "actors/node.hpp"
#include "devices/device.hpp"
#include "runtime/net/auth.hpp"
#include "runtime/client/client.hpp"
#include "runtime/errc.hpp"
#include "runtime/faults.hpp"
#include "runtime/apps/catalog.hpp"
#include "runtime/apps/schema.hpp"
#include "runtime/journal/journal.hpp"
#include "runtime/logging.hpp"
#include "monkey/sdk/version.hpp"
#include "runtime/net/net_config.hpp"
#include "runtime/process/gang.hpp"
#include "runtime/process/proc.hpp"
#include "runtime/spec_parser.hpp"

using namespace monkey;

namespace {

constexpr int exit_startup_error = 2;
constexpr int exit_supervision_gave_up = 3;

struct runtime_config : caf::actor_system_config {
  explicit runtime_config(const net_settings& s) {
    apply_network_config(*this, s);
  }
};

struct options {
  std::string listen = "127.0.0.1:4700";
  std::string data_dir;
  std::string secret_file;
  int cpus = 0;
  uint32_t task_chunk = 256;
  std::vector<std::string> join;
  std::string advertise;
  std::string name;
  std::string suspicion_timeout = "1500ms";
  size_t replicas = 2;
  size_t min_replicas = 1;
  size_t max_queued = 100000;
  std::string gpus = "auto";
  std::string mem;
  std::vector<std::string> tags;
  std::vector<std::string> app_dirs;
  uint64_t checkpoint_max_mb = 8192;
  int checkpoint_keep = 2;
  bool no_measure = false;
  bool no_cgroups = false;
  bool drain = false;
  double kill_grace_s = 10;
  std::string retention = "7d";
  std::string store_keep = "1d";
  std::string log_file;
  std::string log_max_size = "64M";
  size_t log_files = 5;
  bool tls = false;
  std::string tls_dir;
  std::string tls_name = "node";
};

/// GEMM GFLOP/s per device, measured once by monkey-measure in a child process and cached
/// in DATA_DIR/devices.cache (one "KEY<TAB>GFLOPS" line per device, the key naming the
/// device, its model and its slots, so a changed machine is measured again).
void measure_devices(std::vector<devices::device_info>& devs, const std::string& data_dir,
                     spdlog::logger& log) {
  auto key = [](const devices::device_info& d) {
    return d.name + "|" + d.model + "|" + std::to_string(d.slots);
  };
  std::map<std::string, double> cache;
  auto cache_path = data_dir + "/devices.cache";
  {
    std::ifstream in(cache_path);
    std::string line;
    while (std::getline(in, line)) {
      auto tab = line.rfind('\t');
      if (tab != std::string::npos)
        cache[line.substr(0, tab)] = std::atof(line.c_str() + tab + 1);
    }
  }
  std::vector<std::string> argv;
  for (auto& d : devs) {
    if (cache.count(key(d)))
      continue;
    if (argv.empty())
      argv = {self_dir() + "/monkey-measure", "--cpus", std::to_string(devs.front().slots)};
    if (d.kind == "cuda") {
      argv.push_back("--gpu");
      argv.push_back(std::to_string(d.index));
    }
  }
  if (!argv.empty()) {
    auto out = data_dir + "/devices.measure";
    int rc = run_and_wait(argv, out);
    std::ifstream in(out);
    std::string name;
    double gflops;
    std::map<std::string, double> measured;
    while (in >> name >> gflops)
      measured[name] = gflops;
    for (auto& d : devs)
      if (measured.count(d.name))
        cache[key(d)] = measured[d.name];
    if (rc != 0)
      log.warn("device measurement exited {}; devices without a figure show 0", rc);
    std::ofstream cache_out(cache_path, std::ios::trunc);
    for (auto& [k, v] : cache)
      cache_out << k << '\t' << v << '\n';
  }
  for (auto& d : devs) {
    d.gflops = cache.count(key(d)) ? cache[key(d)] : 0;
    log.info("device {} ({}): {:.1f} GFLOP/s (SGEMM){}", d.name, d.model, d.gflops,
             argv.empty() ? ", cached" : "");
  }
}

/// "512K", "64M", "1G" (or a number of bytes).
expected<uint64_t> parse_size_bytes(const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  std::string unit(end ? end : "");
  double mult = unit.empty() ? 1
                : unit == "K" || unit == "k" ? 1024.0
                : unit == "M" || unit == "m" ? 1024.0 * 1024
                : unit == "G" || unit == "g" ? 1024.0 * 1024 * 1024
                                             : -1;
  if (text.empty() || end == text.c_str() || mult < 0 || !(v >= 0) || v * mult > 1e15)
    return failure{"'" + text + "' is not a size (use e.g. 512K, 64M or 1G)"};
  return static_cast<uint64_t>(v * mult);
}

void write_file_atomic(const std::string& path, const std::string& text) {
  auto tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
  }
  std::rename(tmp.c_str(), path.c_str());
}

int fail_start(const std::string& msg) {
  std::fprintf(stderr, "monkey-runtime: %s\n", msg.c_str());
  if (auto log = logger("runtime"))
    log->critical("{}", msg);
  return exit_startup_error;
}

void add_options(CLI::App& app, options& opt) {
  app.set_version_flag("--version", "monkey-runtime " MONKEY_VERSION);
  app.add_option("--listen", opt.listen, "HOST:PORT to accept clients and peers on (port 0: any)")
    ->capture_default_str();
  app.add_option("--name", opt.name,
                 "the node's name in `monkey nodes`, `jobs` and `show`, and wherever a node is "
                 "named (drain NAME, --address NAME); default: the host name and the port")
    ->check([](const std::string& v) {
      if (v.empty() || v.size() > 64)
        return std::string("a name has 1 to 64 characters");
      for (char c : v)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
          return "'" + v + "' has a '" + std::string(1, c)
                 + "': use letters, digits, '-', '_' and '.'";
      return std::string();
    });
  app.add_option("--data-dir", opt.data_dir, "journal, logs and node identity (default MONKEY_HOME/node)");
  app.add_option("--secret-file", opt.secret_file, "cluster secret (created 0600 when missing)");
  app.add_option("--cpus", opt.cpus, "CPUs this node offers (default: all)");
  app.add_option("--gpus", opt.gpus, "GPU indices offered, e.g. 0,1; 'none'; default auto");
  app.add_option("--mem", opt.mem, "memory offered, e.g. 8G (default: all)");
  app.add_option("--tags", opt.tags, "tags this node offers")->delimiter(',');
  app.add_option("--app-dir", opt.app_dirs,
                 "folder of app executables (monkey-app-*; repeatable: the apps of every "
                 "folder given, the first of a name wins; default: the built-in apps, "
                 "beside monkey-runtime or in " MONKEY_APPS_FROM_BIN " from it)");
  app.add_option("--checkpoint-max-mb", opt.checkpoint_max_mb,
                 "largest checkpoint piece this node saves or holds, in MB")
    ->capture_default_str()
    ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
  app.add_option("--checkpoint-keep", opt.checkpoint_keep,
                 "complete checkpoint steps kept per job (older ones are removed)")
    ->capture_default_str()
    ->check(CLI::Range(1, 1000));
  app.add_flag("--no-measure", opt.no_measure, "skip measuring device speed");
  app.add_flag("--no-cgroups", opt.no_cgroups, "track jobs by process group only, even where "
                                               "cgroup v2 is writable");
  app.add_flag("--drain", opt.drain, "on SIGTERM, wait for running jobs instead of requeueing them");
  app.add_option("--kill-grace", opt.kill_grace_s, "seconds between SIGTERM and SIGKILL")
    ->capture_default_str();
  app.add_option("--retention", opt.retention, "keep finished jobs this long, then compact")
    ->capture_default_str();
  app.add_option("--store-keep", opt.store_keep,
                 "remove checkpoints and shipped bundles no job refers to once unwritten this "
                 "long (and no member was lost for as long)")
    ->capture_default_str();
  app.add_option("--join", opt.join, "HOST:PORT of live members to join through (comma-separated)")
    ->delimiter(',');
  app.add_option("--advertise", opt.advertise,
                 "HOST:PORT other nodes reach this one at (default: the listen address)");
  app.add_option("--replicas", opt.replicas, "members holding each job record (R)")
    ->capture_default_str()
    ->check(CLI::Range(1, 16));
  app.add_option("--min-replicas", opt.min_replicas,
                 "refuse submits while fewer members than this are alive")
    ->capture_default_str()
    ->check(CLI::Range(1, 16));
  app.add_option("--max-queued", opt.max_queued,
                 "queued jobs beyond which submissions are answered busy")
    ->capture_default_str()
    ->check(CLI::Range(size_t{1}, size_t{100000000}));
  app.add_option("--suspicion-timeout", opt.suspicion_timeout,
                 "how long a suspected node has to refute before it is declared dead")
    ->capture_default_str();
  app.add_option("--task-chunk", opt.task_chunk,
                 "most tasks handed to a device proxy in one message (1 = one message a task)")
    ->capture_default_str()
    ->check(CLI::Range(1u, 1000000u));
  app.add_flag("--tls", opt.tls,
               "TLS with mutual certificate authentication on every connection (see monkey certs)");
  app.add_option("--tls-dir", opt.tls_dir,
                 "folder with ca.pem and NAME.pem/NAME.key (default MONKEY_HOME/certs; implies --tls)");
  app.add_option("--tls-name", opt.tls_name, "certificate name in the TLS folder (implies --tls)")
    ->capture_default_str();
  app.add_option("--log-file", opt.log_file, "log file (default DATA_DIR/runtime.log; - for stderr)");
  app.add_option("--log-max-size", opt.log_max_size,
                 "rotate the log file at this size (e.g. 64M); older ones get an index before the "
                 "extension: runtime.1.log, runtime.2.log, ...")
    ->capture_default_str();
  app.add_option("--log-files", opt.log_files, "rotated log files kept")
    ->check(CLI::Range(1, 1000))
    ->capture_default_str();
}

/// Creates the data directory (default MONKEY_HOME/node) and starts the rotating log.
status init_node_logging(options& opt) {
  if (opt.data_dir.empty())
    opt.data_dir = monkey_home() + "/node";
  ::mkdir(monkey_home().c_str(), 0700);
  if (::mkdir(opt.data_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return failure{"cannot create data directory " + opt.data_dir + ": " + std::strerror(errno)};
  }
  auto log_max = parse_size_bytes(opt.log_max_size);
  if (!log_max || *log_max < 16 * 1024) {
    return failure{"--log-max-size: "
                   + (log_max ? std::string("must be at least 16K") : log_max.error())};
  }
  init_logging(opt.log_file == "-" ? std::string{}
                                   : (opt.log_file.empty() ? opt.data_dir + "/runtime.log"
                                                           : opt.log_file),
               static_cast<size_t>(*log_max), opt.log_files);
  return {};
}

/// What the options say once checked: addresses, durations, the secret and TLS files.
struct checked_options {
  std::string host;
  uint16_t port = 0;
  double suspicion_s = 0;
  double retention_s = 0;
  double store_keep_s = 0;
  std::string secret;
  net_settings net;
};

status check_address(const std::string& flag, const std::string& address) {
  std::string h;
  uint16_t p = 0;
  if (auto bad = split_address(address, h, p); !bad)
    return failure{flag + ": " + bad.error()};
  return {};
}

expected<checked_options> check_options(const options& opt, bool tls_name_given,
                                        spdlog::logger& log) {
  checked_options c;
  if (auto bad = split_address(opt.listen, c.host, c.port); !bad)
    return failure{"--listen: " + bad.error()};
  for (auto& seed : opt.join)
    if (auto bad = check_address("--join", seed); !bad)
      return failure{bad.error()};
  if (!opt.advertise.empty())
    if (auto bad = check_address("--advertise", opt.advertise); !bad)
      return failure{bad.error()};
  auto suspicion = parse_duration_s(opt.suspicion_timeout);
  if (!suspicion || *suspicion < 0.2 || *suspicion > 600)
    return failure{"--suspicion-timeout: "
                   + (suspicion ? std::string("must be between 200ms and 10m") : suspicion.error())};
  c.suspicion_s = *suspicion;
  auto retention = parse_duration_s(opt.retention);
  if (!retention)
    return failure{"--retention: " + retention.error()};
  c.retention_s = *retention;
  auto keep = parse_duration_s(opt.store_keep);
  if (!keep || *keep < 1)
    return failure{"--store-keep: " + (keep ? std::string("must be at least 1s") : keep.error())};
  c.store_keep_s = *keep;
  if (auto* env = std::getenv("MONKEY_FAULTS"); env && *env) {
    auto f = parse_faults(env);
    if (!f)
      return failure{f.error()};
    log.warn("fault injection is on (MONKEY_FAULTS={}): for tests only", env);
  }
  auto secret_path = find_secret_file(opt.secret_file);
  auto secret = load_secret(secret_path, true);
  if (!secret)
    return failure{secret.error()};
  c.secret = *secret;
  {
    // The client token beside the secret: what users need to run `monkey` (not the secret).
    auto slash = secret_path.rfind('/');
    auto dir = slash == std::string::npos ? std::string(".") : secret_path.substr(0, slash);
    if (auto bad = write_token_file(dir + "/token", client_token(*secret)); !bad)
      log.warn("{}", bad.error());
  }
  if (opt.tls || !opt.tls_dir.empty() || tls_name_given) {
    c.net.tls = tls_files_in(opt.tls_dir.empty() ? monkey_home() + "/certs" : opt.tls_dir,
                             opt.tls_name);
    if (auto bad = check_tls_files(c.net.tls); !bad)
      return failure{"--tls: " + bad.error() + " (create the files with `monkey certs`)"};
  }
  return c;
}

/// Where the built-in apps are when no --app-dir is given: beside this executable (the
/// build tree) and the installed apps folder relative to it (lib/monkey/apps), those that
/// exist.
std::vector<std::string> default_app_dirs() {
  std::vector<std::string> out;
  for (auto dir : {self_dir(), self_dir() + "/" + MONKEY_APPS_FROM_BIN}) {
    std::error_code ec;
    auto canonical = std::filesystem::weakly_canonical(dir, ec).string();
    if (!ec && std::filesystem::is_directory(canonical, ec))
      out.push_back(canonical);
  }
  if (out.empty())
    out.push_back(self_dir());
  return out;
}

/// The apps of --app-dir (default: default_app_dirs), and what their hosts
/// need to connect back.
void find_apps(const options& opt, coordinator_config& cc, const net_settings& net,
               const std::string& secret, spdlog::logger& log) {
  auto dirs = opt.app_dirs.empty() ? default_app_dirs() : opt.app_dirs;
  for (auto& dir : dirs) {
    auto scan = scan_app_dir(dir);
    for (auto& p : scan.problems)
      log.warn("app in {} not offered: {}", dir, p);
    std::string names;
    for (auto& a : scan.apps) {
      if (auto first = cc.app_paths.find(a.entry.name); first != cc.app_paths.end()) {
        log.warn("app {} in {} not offered: {} offers it already (the first --app-dir of a "
                 "name wins)", a.entry.name, dir, first->second);
        continue;
      }
      cc.apps.push_back(a.entry);
      cc.app_paths[a.entry.name] = a.path;
      cc.total.tags.push_back(app_tag(a.entry.name, a.entry.build));
      names += (names.empty() ? "" : ", ") + a.entry.name + " (" + a.entry.build + ")";
    }
    log.info("apps from {}: {}", dir, names.empty() ? std::string("none") : names);
  }
  cc.node_key = node_key(secret);
  cc.app_host_env["MONKEY_HEARTBEAT_MS"] = std::to_string(net.heartbeat.count());
  cc.app_host_env["MONKEY_CONNECTION_TIMEOUT_MS"] = std::to_string(net.connection_timeout.count());
  if (net.tls.enabled()) {
    cc.app_host_env["MONKEY_TLS_CERT"] = net.tls.cert;
    cc.app_host_env["MONKEY_TLS_KEY"] = net.tls.key;
    cc.app_host_env["MONKEY_TLS_CA"] = net.tls.ca;
  }
}

/// The GPUs named by --gpus (indices, "auto" or "none") among those discovered.
expected<std::vector<devices::device_info>> chosen_gpus(const std::string& wanted,
                                                        spdlog::logger& log) {
  std::string why_no_gpu;
  auto gpus = wanted == "none" ? std::vector<devices::device_info>{}
                               : devices::discover_gpus(&why_no_gpu);
  if (gpus.empty())
    log.info("no GPU: {}; jobs run on the CPU", wanted == "none" ? "--gpus none" : why_no_gpu);
  if (wanted == "auto" || wanted == "none")
    return gpus;
  std::vector<devices::device_info> chosen;
  std::stringstream ss(wanted);
  std::string item;
  while (std::getline(ss, item, ',')) {
    bool found = false;
    for (auto& g : gpus)
      if (std::to_string(g.index) == item) {
        chosen.push_back(g);
        found = true;
      }
    if (!found)
      return failure{"--gpus: no GPU with index " + item + " on this machine"
                     + (gpus.empty() ? " (" + why_no_gpu + ")" : "")};
  }
  return chosen;
}

/// The devices and resources this node offers (--cpus, --mem, --gpus, --tags), measured.
status offer_devices(const options& opt, coordinator_config& cc, spdlog::logger& log) {
  auto cpu = devices::discover_cpu();
  auto gpus = chosen_gpus(opt.gpus, log);
  if (!gpus)
    return failure{gpus.error()};
  cc.total.cpus = opt.cpus > 0 ? opt.cpus : cpu.slots;
  cc.total.mem_mb = cpu.memory_mb;
  if (!opt.mem.empty()) {
    auto mb = parse_memory_mb(opt.mem);
    if (!mb)
      return failure{"--mem: " + mb.error()};
    cc.total.mem_mb = *mb;
  }
  cc.total.tags = opt.tags;
  cc.devices.push_back(cpu);
  for (auto& g : *gpus) {
    cc.gpu_indices.push_back(g.index);
    cc.devices.push_back(g);
    cc.total.gpu_mem_mb = cc.total.gpu_mem_mb == 0 ? g.memory_mb
                                                   : std::min(cc.total.gpu_mem_mb, g.memory_mb);
  }
  cc.total.gpus = static_cast<int32_t>(gpus->size());
  cc.devices.front().slots = cc.total.cpus;
  if (!opt.no_measure)
    measure_devices(cc.devices, opt.data_dir, log);
  cc.cgroup_base = opt.no_cgroups ? std::string{} : cgroup_base();
  log.info("process groups are {}",
           !cc.cgroup_base.empty() ? "placed in cgroups under " + cc.cgroup_base
           : opt.no_cgroups        ? std::string("tracked by process group only (--no-cgroups)")
                                   : std::string("tracked by process group only (no writable "
                                                 "cgroup v2)"));
  return {};
}

/// A planned leave (SIGTERM/SIGINT): announced to the members, so it is not taken for a
/// failure; then the coordinator stops (or, with --drain, waits for) its attempts and the
/// task dispatcher lets its chunks in flight finish and writes their final records.
void leave(caf::actor_system& sys, caf::scoped_actor& self, const caf::actor& root, bool drain,
           spdlog::logger& log) {
  if (auto members = caf::actor_cast<caf::actor>(
        sys.registry().get(caf::atom_from_string(membership_name))))
    self->request(members, std::chrono::seconds(2), atoms::shutdown::value)
      .receive([](bool) {},
               [&](caf::error& err) { log.warn("announcing the leave: {}", describe(err)); });
  for (auto* path : {"core/coordinator", "core/tasks"}) {
    caf::actor target;
    self->request(root, std::chrono::seconds(10), atoms::which::value, std::string(path))
      .receive([&](caf::actor& a) { target = std::move(a); }, [](caf::error&) {});
    if (!target) {
      log.error("shutdown: no {} to stop (it is restarting)", path);
      continue;
    }
    self->request(target, caf::infinite, atoms::shutdown::value, drain)
      .receive([](bool) {},
               [&](caf::error& err) { log.error("shutdown of {}: {}", path, describe(err)); });
  }
}

/// The journal commits what it still holds (metrics batches) before the node stops.
void final_flush(caf::scoped_actor& self, const caf::actor& root, spdlog::logger& log) {
  self->request(root, std::chrono::seconds(10), atoms::which::value, std::string("core/journal"))
    .receive(
      [&](caf::actor& journal_actor) {
        self->request(journal_actor, std::chrono::seconds(10), atoms::flush::value, true)
          .receive([](bool) {}, [&](caf::error& err) { log.warn("final flush: {}", describe(err)); });
      },
      [&](caf::error& err) { log.warn("final flush: no journal ({})", describe(err)); });
}

/// main watches the root of the tree until a signal asks it to stop (0) or the root gives
/// up (the node cannot go on: exit_supervision_gave_up).
int watch(caf::actor_system& sys, const caf::actor& root, sigset_t& sigs, bool drain,
          spdlog::logger& log) {
  caf::scoped_actor self{sys};
  self->monitor(root);
  int exit_code = 0;
  for (;;) {
    timespec wait{0, 200 * 1000 * 1000};
    int sig = sigtimedwait(&sigs, nullptr, &wait);
    std::string failure_reason;
    bool down = false;
    self->receive_while([&] { return !down; })(
      [&](caf::down_msg& dm) {
        down = true;
        failure_reason = "the node's root supervisor stopped: " + describe(dm.reason);
      },
      caf::after(std::chrono::milliseconds(0)) >> [&] { down = true; });
    if (!failure_reason.empty()) {
      log.critical("supervision gave up: {}", failure_reason);
      std::fprintf(stderr, "monkey-runtime: supervision gave up: %s\n", failure_reason.c_str());
      exit_code = exit_supervision_gave_up;
      break;
    }
    if (sig == SIGTERM || sig == SIGINT) {
      log.info("{} received: {}", sig == SIGTERM ? "SIGTERM" : "SIGINT",
               drain ? "draining" : "requeueing running jobs");
      leave(sys, self, root, drain, log);
      break;
    }
  }
  if (exit_code == 0)
    final_flush(self, root, log);
  self->demonitor(root);
  return exit_code;
}

} // namespace

int main(int argc, char** argv) {
  // A gang command job's runner (runtime/process/gang.hpp): started by this node's worker.
  if (argc > 1 && std::string(argv[1]) == "__gang")
    return run_gang(std::vector<std::string>(argv + 2, argv + argc));
  options opt;
  CLI::App app{"monkey-runtime: one node of a Monkey cluster"};
  add_options(app, opt);
  CLI11_PARSE(app, argc, argv);

  if (auto bad = init_node_logging(opt); !bad) {
    std::fprintf(stderr, "monkey-runtime: %s\n", bad.error().c_str());
    return exit_startup_error;
  }
  auto log = logger("runtime");

  // Signals are taken synchronously by main: block them before any thread starts.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  auto checked = check_options(opt, app.count("--tls-name") > 0, *log);
  if (!checked)
    return fail_start(checked.error());
  auto& net = checked->net;

  std::vector<std::string> warnings;
  auto store = journal::open(opt.data_dir, &warnings);
  if (!store)
    return fail_start(store.error());
  for (auto& w : warnings) {
    log->warn("{}", w);
    std::fprintf(stderr, "monkey-runtime: warning: %s\n", w.c_str());
  }
  std::shared_ptr<journal> shared_store{std::move(*store)};

  // Devices and what this node offers.
  coordinator_config cc;
  cc.node = shared_store->node();
  cc.incarnation = shared_store->incarnation();
  cc.data_dir = opt.data_dir;
  cc.pid = static_cast<int32_t>(::getpid());
  cc.started_ms = now_ms();
  cc.version = MONKEY_VERSION;
  cc.kill_grace = std::chrono::milliseconds(static_cast<int64_t>(opt.kill_grace_s * 1000));
  cc.retention_ms = static_cast<int64_t>(checked->retention_s * 1000);
  cc.store_keep_ms = static_cast<int64_t>(checked->store_keep_s * 1000);
  cc.replicas = opt.replicas;
  cc.min_replicas = opt.min_replicas;
  cc.max_queued = opt.max_queued;
  if (auto bad = offer_devices(opt, cc, *log); !bad)
    return fail_start(bad.error());
  find_apps(opt, cc, net, checked->secret, *log);

  runtime_config cfg{net};
  if (auto bad = check_network_config(cfg); !bad)
    return fail_start("network configuration: " + bad.error());
  caf::actor_system sys{cfg};
  node_setup setup;
  setup.coordinator = cc;
  setup.store = shared_store;
  setup.launch = std::make_shared<launcher>();
  setup.secret = checked->secret;
  setup.host = checked->host;
  setup.port = checked->port;
  setup.seeds = opt.join;
  setup.suspicion_timeout = std::chrono::milliseconds(static_cast<int64_t>(checked->suspicion_s * 1000));
  setup.advertise = opt.advertise;
  setup.name = opt.name;
  setup.task_chunk = opt.task_chunk;
  setup.checkpoints.node = cc.node.str();
  setup.checkpoints.root = opt.data_dir + "/checkpoints";
  setup.checkpoints.max_bytes = opt.checkpoint_max_mb << 20;
  setup.checkpoints.keep_steps = opt.checkpoint_keep;
  setup.checkpoints.listen_host = checked->host;
  setup.checkpoints.tls = net.tls;
  if (!opt.advertise.empty())
    setup.checkpoints.advertise_host = opt.advertise.substr(0, opt.advertise.rfind(':'));
  auto node = start_node(sys, setup);
  if (!node)
    return fail_start(node.error());
  auto published_host = checked->host == "0.0.0.0" ? std::string{"127.0.0.1"} : checked->host;
  auto address = published_host + ":" + std::to_string(node->port);
  caf::anon_send(current_coordinator(sys, node->root), atoms::address::value, address);
  write_file_atomic(opt.data_dir + "/address", address + "\n");
  write_file_atomic(opt.data_dir + "/pid", std::to_string(::getpid()) + "\n");
  log->info("node {} incarnation {} listening on {} ({} cpus, {} MB, {} gpus, {})", cc.node.str(),
            cc.incarnation, address, cc.total.cpus, cc.total.mem_mb, cc.total.gpus,
            net.tls.enabled() ? "TLS as " + certificate_name(net.tls.cert)
                              : std::string("plain TCP, no TLS"));

  int exit_code = watch(sys, node->root, sigs, opt.drain, *log);
  caf::anon_send_exit(node->root, caf::exit_reason::user_shutdown);
  if (!cc.cgroup_base.empty()) // empty by now: every job's cgroup went with its job
    ::rmdir((cc.cgroup_base + "/monkey-" + cc.node.str()).c_str());
  log->info("stopped");
  std::fflush(nullptr);
  // Children are gone or requeued; skip the slow teardown of CAF's threads.
  ::_exit(exit_code);
}
