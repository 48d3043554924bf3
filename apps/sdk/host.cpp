// SPDX-License-Identifier: Apache-2.0
// The app host: what `monkey-app-NAME` does when a node starts it for a job. It reads the
// attempt from its environment, connects back to its node on loopback with the node's
// network settings and the attempt's own key (role app: the SDK's verbs only), spawns the
// entry actor of every rank it hosts, restarts failed ranks by the app's policy, sends
// their metric points to the node, and exits 0 when every rank has finished.
#include "monkey/app.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <ctime>
#include <set>
#include <csignal>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <unistd.h>

#include <caf/io/all.hpp>

#include "host_state.hpp"
#include "monkey/sdk/attempt.hpp"
#include "monkey/sdk/version.hpp"
#include "runtime/apps/exit_codes.hpp"
#include "runtime/apps/schema.hpp"
#include "runtime/errc.hpp"
#include "runtime/ids.hpp"
#include "runtime/job.hpp"
#include "runtime/net/auth.hpp"
#include "runtime/net/net.hpp"
#include "runtime/net/net_config.hpp"
#include "runtime/wire/codec.hpp"
#include "runtime/wire/envelope.hpp"
#include "runtime/wire/messages/client.hpp"

namespace monkey::app {

namespace {

std::string env_or(const char* name, const std::string& fallback = "") {
  auto* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

/// How often the host sends its ranks' metric points (and hears what the node asks).
constexpr std::chrono::milliseconds report_interval{200};

using start_atom = caf::atom_constant<caf::atom("a_start")>;
/// Asked of a host's rank directory by the other hosts of a gang across nodes.
using directory_atom = caf::atom_constant<caf::atom("a_dir")>;
/// Asked of a host's rank directory: its data plane endpoint.
using dataplane_atom = caf::atom_constant<caf::atom("a_dp")>;

/// Reports in a row answered "this attempt does not run on this node" before the host stops.
constexpr int orphan_reports = 10;

/// How long a host of a gang across nodes waits for every other host to be ready.
constexpr std::chrono::seconds assemble_limit{120};

std::atomic<int> stop_signal{0};

void on_stop_signal(int sig) {
  stop_signal = sig;
}

} // namespace

// ---- context ------------------------------------------------------------------------------------

context::context(std::shared_ptr<host_state> host, int32_t rank)
  : host_(std::move(host)), rank_(rank) {}

int32_t context::world_size() const { return host_->world; }

double context::device_gflops() const {
  auto* v = std::getenv("MONKEY_GFLOPS");
  double g = v ? std::atof(v) : 0;
  return g > 0 && std::isfinite(g) ? g : 0;
}
const std::string& context::job_id() const { return host_->job; }
int32_t context::attempt() const { return host_->attempt; }
uint64_t context::seed() const { return host_->seed; }

int32_t context::restarts() const {
  std::lock_guard<std::mutex> guard{host_->mtx};
  auto it = host_->restarts.find(rank_);
  return it == host_->restarts.end() ? 0 : it->second;
}

const std::map<std::string, std::string>& context::params() const { return host_->params; }

std::string context::param(const std::string& name) const {
  auto it = host_->params.find(name);
  return it == host_->params.end() ? std::string{} : it->second;
}

int64_t context::param_int(const std::string& name) const {
  return std::strtoll(param(name).c_str(), nullptr, 10);
}

double context::param_float(const std::string& name) const {
  return std::strtod(param(name).c_str(), nullptr);
}

bool context::param_bool(const std::string& name) const {
  auto v = param(name);
  return v == "true" || v == "1";
}

caf::actor context::peer(int32_t r) const {
  std::lock_guard<std::mutex> guard{host_->mtx}; // a restarted rank's handle is replaced
  if (r < 0 || r >= static_cast<int32_t>(host_->peers.size()))
    return nullptr;
  return host_->peers[static_cast<size_t>(r)];
}

void context::report(int64_t step, const std::map<std::string, double>& values) const {
  auto now = now_ms();
  std::lock_guard<std::mutex> guard{host_->mtx};
  for (auto& [k, v] : values)
    host_->points.push_back(metric_point{host_->id, host_->attempt, now, k, v, step, rank_});
}

void context::log(const std::string& line) const {
  std::lock_guard<std::mutex> guard{host_->mtx};
  if (auto* f = host_->log_of(rank_)) {
    auto now = now_ms();
    time_t secs = static_cast<time_t>(now / 1000);
    struct tm tmv {};
    ::localtime_r(&secs, &tmv);
    char stamp[32];
    std::strftime(stamp, sizeof(stamp), "%H:%M:%S", &tmv);
    std::fprintf(f, "%s.%03d rank %d: %s\n", stamp, static_cast<int>(now % 1000), rank_,
                 line.c_str());
    std::fflush(f);
  }
}


namespace {

bool write_file(const std::string& path, const std::string& bytes, std::string& why) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    why = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  ok = std::fclose(f) == 0 && ok;
  if (!ok)
    why = "cannot write " + path + ": " + std::strerror(errno);
  return ok;
}

} // namespace

bool context::save_checkpoint(int64_t step, const std::string& bytes) const {
  if (host_->ckpt_dir.empty()) {
    log("checkpoint step " + std::to_string(step) + " not saved: no MONKEY_CHECKPOINT_DIR");
    return false;
  }
  if (step < 0) {
    log("checkpoint not saved: the step must be 0 or more, not " + std::to_string(step));
    return false;
  }
  auto dir = host_->ckpt_dir + "/.save/" + std::to_string(step);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  auto name = "rank-" + std::to_string(rank_);
  std::string why;
  if (!write_file(dir + "/." + name + ".tmp", bytes, why)
      || std::rename((dir + "/." + name + ".tmp").c_str(), (dir + "/" + name).c_str()) != 0) {
    log("checkpoint step " + std::to_string(step) + " not saved: "
        + (why.empty() ? std::string(std::strerror(errno)) : why));
    return false;
  }
  std::lock_guard<std::mutex> guard{host_->mtx};
  auto& ranks = host_->saved[step];
  ranks.insert(rank_);
  if (ranks.size() >= host_->local_ranks) {
    host_->ready.push_back(step);
    host_->saved.erase(host_->saved.begin(), host_->saved.upper_bound(step));
  }
  return true;
}

std::optional<checkpoint> context::latest_checkpoint(int32_t r) const {
  std::string path;
  checkpoint c;
  {
    std::lock_guard<std::mutex> guard{host_->mtx};
    if (host_->ckpt_dir.empty())
      return std::nullopt;
    auto name = "rank-" + std::to_string(r);
    if (host_->durable_step >= 0 && host_->durable_step >= host_->restored_step) {
      c.step = host_->durable_step;
      path = host_->ckpt_dir + "/.last/" + name;
    } else if (host_->restored_step >= 0) {
      c.step = host_->restored_step;
      path = host_->ckpt_dir + "/" + name;
    } else {
      return std::nullopt;
    }
  }
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f)
    return std::nullopt; // a rank another host saved, not restored here
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0)
    c.data.append(buf, n);
  std::fclose(f);
  return c;
}

caf::actor context::spawn(const std::string& actor_name) const {
  for (auto& a : host_->app->actors())
    if (a.name == actor_name) {
      auto fn = a.fn;
      auto ctx = *this;
      auto body = [fn, ctx](caf::event_based_actor* self) { return fn(self, ctx); };
      return host_->app->uses_own_threads() ? host_->sys->spawn<caf::detached>(body)
                                            : host_->sys->spawn(body);
    }
  return nullptr;
}

// ---- the host -------------------------------------------------------------------------------------

namespace {

struct host_config : caf::actor_system_config {
  explicit host_config(const net_settings& s) { apply_network_config(*this, s); }
};

void usage(const definition& app) {
  std::fprintf(stderr,
               "monkey-app-%s: a Monkey app (SDK %s).\n"
               "  --describe   print its parameters and actors (JSON)\n"
               "  --help       this text\n"
               "Run it as a job: monkey submit --app %s --workers N [--set NAME=VALUE ...]\n",
               app.name().c_str(), MONKEY_VERSION, app.name().c_str());
}

int fail(const std::string& why) {
  std::fprintf(stderr, "app host: %s\n", why.c_str());
  return 2;
}

/// A rank's actor: waits for the host's start (so that every rank's peer handles are known
/// before any app code runs), keeping what arrives meanwhile, then becomes the app's actor.
caf::behavior rank_shell(caf::event_based_actor* self, actor_fn fn, context ctx) {
  self->set_default_handler(caf::skip);
  return {
    [=](start_atom) {
      self->set_default_handler(caf::print_and_drop);
      self->become(fn(self, ctx));
    },
  };
}

class host {
public:
  host(const definition& app, std::shared_ptr<host_state> st, caf::actor_system& sys,
       caf::scoped_actor& self, caf::actor gateway, std::vector<int32_t> ranks)
    : app_(app), st_(std::move(st)), sys_(sys), self_(self), gateway_(std::move(gateway)),
      ranks_(std::move(ranks)) {}

  /// One request to the node through the authenticated session (the scoped actor).
  expected<std::string> call(verb v, std::string body, std::chrono::milliseconds timeout) {
    expected<std::string> out{failure{"no answer"}};
    self_->request(gateway_, timeout, envelope{static_cast<uint16_t>(v), std::move(body)})
      .receive([&](std::string& reply) { out = std::move(reply); },
               [&](caf::error& err) { out = failure{describe(err)}; });
    return out;
  }

  status authenticate(const std::string& key) {
    hello_request h;
    h.role = "app";
    h.attempt = st_->attempt_id;
    auto hello = call(verb::hello, encode(h), std::chrono::seconds(10));
    if (!hello)
      return failure{"hello: " + hello.error()};
    auto hr = decode<hello_reply>(*hello, "hello");
    if (!hr)
      return failure{hr.error()};
    auth_request a;
    a.client_nonce = make_nonce();
    a.user = "app-host";
    a.host = "localhost";
    a.proof = client_proof(key, hr->nonce, a.client_nonce, a.user);
    auto ok = call(verb::auth, encode(a), std::chrono::seconds(10));
    if (!ok)
      return failure{"auth: " + ok.error()};
    auto proof = decode<auth_reply>(*ok, "auth");
    if (!proof || !equal_digest(proof->proof, server_proof(key, hr->nonce, a.client_nonce)))
      return failure{"the node could not prove it knows the attempt's key"};
    return {};
  }

  /// Spawns rank `r`'s entry actor (not started yet).
  void spawn_rank(int32_t r) {
    auto& entry = app_.actors().front();
    auto a = app_.uses_own_threads()
               ? sys_.spawn<caf::lazy_init + caf::detached>(rank_shell, entry.fn, context{st_, r})
               : sys_.spawn<caf::lazy_init>(rank_shell, entry.fn, context{st_, r});
    self_->monitor(a);
    {
      std::lock_guard<std::mutex> guard{st_->mtx};
      st_->peers[static_cast<size_t>(r)] = a;
    }
    live_[a.address()] = r;
  }

  void start_ranks(const std::vector<int32_t>& ranks) {
    for (auto r : ranks)
      caf::anon_send(st_->peers[static_cast<size_t>(r)], start_atom::value);
  }

  /// Sends the ranks' metric points (at least one report each round, empty or not: its
  /// answer carries what the node asks of the host, e.g. a rank to kill).
  void flush() {
    std::vector<metric_point> pts;
    {
      std::lock_guard<std::mutex> guard{st_->mtx};
      pts.swap(st_->points);
    }
    size_t i = 0;
    do {
      app_report_request req;
      auto end = std::min(pts.size(), i + 4096);
      req.points.assign(pts.begin() + static_cast<long>(i), pts.begin() + static_cast<long>(end));
      i = end;
      auto r = call(verb::app_report, encode(req), std::chrono::seconds(10));
      if (!r) {
        std::fprintf(stderr, "app host: %zu metric points not delivered: %s\n", req.points.size(),
                     r.error().c_str());
        // The node no longer runs this attempt (its coordinator restarted, or voided it).
        if (r.error().find("does not run on this node") != std::string::npos)
          ++unknown_reports_;
        continue;
      }
      unknown_reports_ = 0;
      if (auto answer = decode<app_report_reply>(*r, "app report")) {
        for (auto rank : answer->kill_ranks)
          kill_rank(rank);
        if (!answer->peers.empty())
          peers_ = answer->peers;
        if (!answer->stop.empty())
          stop_ = answer->stop;
      }
    } while (i < pts.size());
  }

  /// Hands the newest step every rank of this host saved to the node (older ones are
  /// superseded); the node answers once the job's holders stored it.
  void send_checkpoints() {
    int64_t step = -1;
    {
      std::lock_guard<std::mutex> guard{st_->mtx};
      if (st_->ready.empty())
        return;
      step = *std::max_element(st_->ready.begin(), st_->ready.end());
      st_->ready.clear();
    }
    namespace fs = std::filesystem;
    std::error_code ec;
    auto save = st_->ckpt_dir + "/.save";
    for (auto it = fs::directory_iterator(save, ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) // superseded saves
      if (std::strtoll(it->path().filename().c_str(), nullptr, 10) < step)
        fs::remove_all(it->path(), ec);
    // What latest_checkpoint() reads once this step counts: links to the same files (the
    // node moves them into its store, and never writes them again).
    auto staged = save + "/" + std::to_string(step);
    auto next = st_->ckpt_dir + "/.last-" + std::to_string(step);
    fs::remove_all(next, ec);
    fs::create_directories(next, ec);
    for (auto r : ranks_) {
      auto name = "/rank-" + std::to_string(r);
      ::link((staged + name).c_str(), (next + name).c_str());
    }
    app_checkpoint_request req;
    req.step = step;
    req.ranks = ranks_;
    auto r = call(verb::app_checkpoint, encode(req), std::chrono::minutes(10));
    if (!r) {
      fs::remove_all(next, ec);
      for (auto rank : ranks_)
        log_rank(rank, "checkpoint step " + std::to_string(step) + " does not count: "
                         + r.error());
      std::fprintf(stderr, "app host: checkpoint step %lld does not count: %s\n",
                   static_cast<long long>(step), r.error().c_str());
      return;
    }
    auto last = st_->ckpt_dir + "/.last";
    fs::remove_all(last, ec);
    fs::rename(next, last, ec);
    std::lock_guard<std::mutex> guard{st_->mtx};
    st_->durable_step = step;
  }

  /// `monkey kill .../rank-R`: the rank's actor is killed as a failure would (the policy
  /// restarts it).
  void kill_rank(int32_t r) {
    for (auto& [addr, rr] : live_)
      if (rr == r) {
        std::fprintf(stderr, "app host: rank %d killed on request (monkey kill)\n", r);
        caf::anon_send_exit(st_->peers[static_cast<size_t>(r)], caf::exit_reason::kill);
        return;
      }
  }

  void announce() {
    app_ready_request req;
    req.endpoint = endpoint_;
    req.ranks = ranks_;
    req.pid = static_cast<int32_t>(::getpid());
    req.actors.assign(ranks_.size(), app_.actors().front().name);
    if (auto ok = call(verb::app_ready, encode(req), std::chrono::seconds(10)); !ok)
      std::fprintf(stderr, "app host: the node did not take the ready message: %s\n",
                   ok.error().c_str());
  }

  /// Whether the policy allows another restart now (R within T).
  bool may_restart() {
    auto now = std::chrono::steady_clock::now();
    while (!restart_times_.empty() && now - restart_times_.front() > app_.restart_window())
      restart_times_.erase(restart_times_.begin());
    if (static_cast<int>(restart_times_.size()) >= app_.max_restarts())
      return false;
    restart_times_.push_back(now);
    return true;
  }

  void stop_all() {
    for (auto& [addr, r] : live_)
      caf::anon_send_exit(st_->peers[static_cast<size_t>(r)], caf::exit_reason::user_shutdown);
  }

  /// A gang across nodes: this host's ranks are reached by the others through a directory
  /// published on the node's host; "" when it could not be published (the error is said).
  std::string publish_directory(const std::string& host) {
    auto st = st_;
    directory_ = sys_.spawn([st](caf::event_based_actor*) -> caf::behavior {
      return {
        [st](directory_atom, const std::string& token) -> caf::result<std::vector<caf::actor>> {
          if (token != st->token)
            return make_error(errc::refused, "wrong gang token");
          std::lock_guard<std::mutex> guard{st->mtx};
          return st->peers;
        },
        [st](dataplane_atom, const std::string& token) -> caf::result<std::string> {
          if (token != st->token)
            return make_error(errc::refused, "wrong gang token");
          auto plane = st->plane();
          return plane ? plane->endpoint() : std::string{};
        },
      };
    });
    auto port = publish_actor(directory_, 0, host);
    if (!port) {
      std::fprintf(stderr, "app host: cannot publish its rank directory on %s: %s\n",
                   host.c_str(), sys_.render(port.error()).c_str());
      return {};
    }
    return host + ":" + std::to_string(*port);
  }

  /// Reaches every other host's directory and takes its ranks' handles; false (and says
  /// why) when one cannot be reached.
  bool connect_peers() {
    for (auto& ep : peers_) {
      if (ep == endpoint_)
        continue;
      std::string h;
      uint16_t port = 0;
      if (!split_address(ep, h, port)) {
        std::fprintf(stderr, "app host: bad peer endpoint '%s'\n", ep.c_str());
        return false;
      }
      auto dir = connect_actor(sys_, h, port, std::chrono::seconds(10));
      if (!dir) {
        std::fprintf(stderr, "app host: cannot reach the host at %s: %s\n", ep.c_str(),
                     describe_connect_error(sys_, dir.error(), ep).c_str());
        return false;
      }
      // Two hosts connect to each other at the same moment; a request can be lost with the
      // connection CAF drops of the two (seen once in 60 CI runs over TLS: both hosts
      // waited 10 s): asked again over the connection that stays, within the same 10 s.
      bool ok = false;
      caf::error last;
      for (int attempt = 0; attempt < 3 && !ok; ++attempt) {
        if (attempt > 0) {
          auto again = connect_actor(sys_, h, port, std::chrono::seconds(10));
          if (again)
            *dir = *again;
        }
        auto wait = std::chrono::seconds(attempt < 2 ? 3 : 4);
        self_->request(*dir, wait, directory_atom::value, st_->token)
          .receive(
            [&](std::vector<caf::actor>& theirs) {
              std::lock_guard<std::mutex> guard{st_->mtx};
              for (size_t r = 0; r < theirs.size() && r < st_->peers.size(); ++r)
                if (theirs[r] && !own(static_cast<int32_t>(r)))
                  st_->peers[r] = theirs[r];
              ok = true;
            },
            [&](caf::error& err) { last = std::move(err); });
        if (!ok && last && last.category() != caf::atom("system"))
          break; // refused (a wrong token): asking again does not help
      }
      if (!ok) {
        std::fprintf(stderr, "app host: the host at %s did not show its ranks: %s\n",
                     ep.c_str(), sys_.render(last).c_str());
        return false;
      }
      if (st_->plane()) {
        self_->request(*dir, std::chrono::seconds(10), dataplane_atom::value, st_->token)
          .receive([&](std::string& ep) { plane_endpoints_.push_back(ep); },
                   [&](caf::error& err) {
                     ok = false;
                     std::fprintf(stderr, "app host: the host at %s did not show its data plane: "
                                          "%s\n", ep.c_str(), sys_.render(err).c_str());
                   });
        if (!ok)
          return false;
      }
    }
    std::lock_guard<std::mutex> guard{st_->mtx};
    for (size_t r = 0; r < st_->peers.size(); ++r)
      if (!st_->peers[r]) {
        std::fprintf(stderr, "app host: no host of the gang runs rank %zu\n", r);
        return false;
      }
    return true;
  }

  /// A gang across nodes: waits until the node hands out every host's endpoint, then
  /// reaches them; the exit code when it cannot (-1: assembled).
  int assemble() {
    auto until = std::chrono::steady_clock::now() + assemble_limit;
    while (peers_.empty()) {
      if (stop_signal != 0)
        return 128 + stop_signal;
      if (!stop_.empty()) {
        std::fprintf(stderr, "app host: stopped by its node before the gang assembled: %s\n",
                     stop_.c_str());
        return 1;
      }
      if (unknown_reports_ >= orphan_reports) {
        std::fprintf(stderr, "app host: its node no longer runs this attempt; stopping\n");
        return 3;
      }
      if (std::chrono::steady_clock::now() > until) {
        std::fprintf(stderr, "app host: the other hosts of the gang were not ready within %lld "
                             "s; the attempt fails\n",
                     static_cast<long long>(assemble_limit.count()));
        return 1;
      }
      self_->receive([](caf::down_msg&) {}, caf::after(report_interval) >> [] {});
      flush();
    }
    return connect_peers() ? -1 : 1;
  }

  /// Waits for the ranks to finish; the process's exit code.
  int run(const std::string& node_host) {
    bool multi = static_cast<int32_t>(ranks_.size()) < st_->world;
    if (!open_plane())
      return 1;
    if (multi) {
      for (auto r : ranks_)
        spawn_rank(r);
      endpoint_ = publish_directory(node_host);
      if (endpoint_.empty())
        return 1;
      announce();
      if (auto code = assemble(); code >= 0) {
        stop_all();
        return code;
      }
      if (auto plane = st_->plane()) {
        plane_endpoints_.push_back(plane->endpoint());
        if (!join_plane(plane_endpoints_)) {
          stop_all();
          return 1;
        }
      }
      start_ranks(ranks_);
      std::fprintf(stderr, "app host: the gang assembled (%zu hosts); ranks %s start\n",
                   peers_.size(), rank_list_text(ranks_).c_str());
    } else {
      if (auto plane = st_->plane(); plane && !join_plane({plane->endpoint()}))
        return 1;
      spawn_and_start(ranks_);
      announce();
    }
    bool gateway_down = false;
    self_->monitor(gateway_);
    int exit_code = -1;
    std::set<caf::actor_addr> stopping; ///< ranks stopped for a gang restart
    std::vector<int32_t> to_restart;
    while (exit_code < 0) {
      self_->receive(
        [&](caf::down_msg& dm) {
          if (dm.source == gateway_.address()) {
            gateway_down = true;
            return;
          }
          auto it = live_.find(dm.source);
          if (it == live_.end())
            return;
          auto r = it->second;
          live_.erase(it);
          if (stopping.erase(dm.source)) {
            if (stopping.empty()) {
              if (!reset_plane()) {
                exit_code = 1;
                return;
              }
              spawn_and_start(to_restart);
              to_restart.clear();
            }
            return;
          }
          if (!dm.reason || dm.reason == caf::exit_reason::normal) {
            done_.insert(r);
            return;
          }
          auto why = sys_.render(dm.reason);
          std::fprintf(stderr, "app host: rank %d failed: %s\n", r, why.c_str());
          log_rank(r, "failed: " + why);
          if (multi) {
            // The other hosts hold this rank's old handle: the whole gang starts again, as a
            // new attempt from the newest complete checkpoint (the policy asks its owner).
            if (app_.policy() == failure_policy::gang && may_restart()) {
              std::fprintf(stderr, "app host: rank %d failed in a gang across nodes: the app's "
                                   "gang policy starts the whole gang again from its newest "
                                   "checkpoint\n", r);
              exit_code = gang_restart_exit;
            } else {
              std::fprintf(stderr, "app host: in a gang across nodes a failed rank fails the "
                                   "attempt (the job's retries start the whole gang again)\n");
              exit_code = 1;
            }
            return;
          }
          if (!may_restart()) {
            std::fprintf(stderr,
                         "app host: rank %d failed %d times within %lld s (its restart limit); "
                         "the attempt fails\n",
                         r, app_.max_restarts() + 1,
                         static_cast<long long>(app_.restart_window().count()));
            exit_code = 1;
            return;
          }
          if (app_.policy() == failure_policy::rank) {
            note_restart(r);
            spawn_and_start({r});
            return;
          }
          // gang: every rank of this host starts again (the others' hosts restart with the
          // attempt when they span several nodes).
          to_restart = ranks_;
          for (auto& rr : to_restart)
            note_restart(rr);
          done_.clear();
          if (live_.empty()) {
            if (!reset_plane()) {
              exit_code = 1;
              return;
            }
            spawn_and_start(to_restart);
            to_restart.clear();
            return;
          }
          for (auto& [addr, rr] : live_)
            stopping.insert(addr);
          stop_all();
        },
        caf::after(report_interval) >> [&] {});
      // One report per interval, however many ranks came and went meanwhile.
      if (auto now = std::chrono::steady_clock::now(); now - last_report_ >= report_interval) {
        last_report_ = now;
        flush();
      }
      send_checkpoints();
      if (gateway_down) {
        std::fprintf(stderr, "app host: lost the connection to its node; stopping\n");
        exit_code = 3;
      } else if (unknown_reports_ >= orphan_reports) {
        std::fprintf(stderr, "app host: its node no longer runs this attempt; stopping\n");
        exit_code = 3;
      } else if (stop_signal != 0) {
        exit_code = 128 + stop_signal;
      } else if (live_.empty() && stopping.empty() && to_restart.empty()
                 && done_.size() == ranks_.size()) {
        exit_code = 0;
      }
    }
    stop_all();
    if (exit_code == 0)
      send_checkpoints(); // the last step every rank saved before it finished
    flush();
    return exit_code;
  }

private:
  /// The data plane (an app that uses it): listens now, joins once the endpoints are known.
  bool open_plane() {
    if (!app_.uses_data_plane())
      return true;
    auto m = dp::mesh::create(st_->world, ranks_, st_->plane_opts);
    if (!m) {
      std::fprintf(stderr, "app host: the data plane cannot start: %s\n", m.error().c_str());
      return false;
    }
    st_->set_plane(std::shared_ptr<dp::mesh>(std::move(*m)));
    return true;
  }

  bool join_plane(const std::vector<std::string>& endpoints) {
    auto plane = st_->plane();
    if (auto ok = plane->connect(endpoints); !ok) {
      std::fprintf(stderr, "app host: the data plane did not join: %s\n", ok.error().c_str());
      return false;
    }
    std::map<std::string, int> kinds;
    int shm = 0, single_copy = 0; // shm links, and those read both ways by CMA
    for (auto r : ranks_)
      for (int32_t p = 0; p < st_->world; ++p)
        if (auto t = plane->comm(r)->transport(p); !t.empty()) {
          kinds[t] += 1;
          shm += t == "shm";
          single_copy += t == "shm" && plane->comm(r)->single_copy(p);
        }
    std::string said;
    for (auto& [k, n] : kinds)
      said += (said.empty() ? "" : ", ") + std::to_string(n) + " " + k;
    std::string cma;
    if (shm > 0)
      cma = single_copy == shm
              ? "; single-copy reads (CMA) on every shm link"
              : "; single-copy reads (CMA) on " + std::to_string(single_copy) + " of "
                  + std::to_string(shm)
                  + " shm links (the others refused it: Yama's ptrace_scope, another pid "
                    "namespace or a seccomp filter; heap tensors take the rings there)";
    std::fprintf(stderr, "app host: data plane joined (%s links of %zu local ranks%s)\n",
                 said.empty() ? "no" : said.c_str(), ranks_.size(), cma.c_str());
    return true;
  }

  /// A gang restart on one host: the ranks start again on a fresh data plane (what the old
  /// one held in flight belonged to the failed ranks).
  bool reset_plane() {
    auto old = st_->plane();
    if (!old)
      return true;
    old->close();
    st_->set_plane(nullptr);
    return open_plane() && join_plane({st_->plane()->endpoint()});
  }

  void spawn_and_start(const std::vector<int32_t>& ranks) {
    for (auto r : ranks)
      spawn_rank(r);
    start_ranks(ranks);
  }

  bool own(int32_t r) const { return std::find(ranks_.begin(), ranks_.end(), r) != ranks_.end(); }

  void note_restart(int32_t r) {
    std::lock_guard<std::mutex> guard{st_->mtx};
    st_->restarts[r] += 1;
  }

  void log_rank(int32_t r, const std::string& line) { context{st_, r}.log(line); }

  const definition& app_;
  std::shared_ptr<host_state> st_;
  caf::actor_system& sys_;
  caf::scoped_actor& self_;
  caf::actor gateway_;
  std::vector<int32_t> ranks_;
  std::map<caf::actor_addr, int32_t> live_;
  std::set<int32_t> done_;
  std::vector<std::chrono::steady_clock::time_point> restart_times_;
  std::chrono::steady_clock::time_point last_report_ = std::chrono::steady_clock::now();
  std::string endpoint_;           ///< this host's rank directory (a gang across nodes)
  caf::actor directory_;
  std::vector<std::string> peers_; ///< every host's directory, from the node
  std::vector<std::string> plane_endpoints_; ///< every other host's data plane endpoint
  std::string stop_;               ///< the node asked the host to stop (why)
  int unknown_reports_ = 0;        ///< reports in a row the node answered "not running here"
};

int host_main(const definition& app) {
  if (app.actors().empty())
    return fail("the app defines no entry actor (definition::entry)");
  sdk::context_error err;
  auto at = sdk::current_attempt(&err);
  if (!at)
    return fail(err.what + "; this program is started by a Monkey node: submit it with "
                           "`monkey submit --app " + app.name() + "`");
  auto st = std::make_shared<host_state>();
  st->app = &app;
  st->job = at->job_id;
  if (auto id = monkey::job_id::parse(at->job_id))
    st->id = *id;
  else
    return fail("MONKEY_JOB_ID '" + at->job_id + "' is not a job id");
  st->attempt = at->attempt;
  st->attempt_id = at->attempt_id;
  st->seed = at->seed;
  st->world = static_cast<int32_t>(std::strtol(env_or("MONKEY_WORLD_SIZE", "1").c_str(), nullptr, 10));
  st->log_out = env_or("MONKEY_RANK_LOGS");
  st->token = env_or("MONKEY_GANG_TOKEN");
  st->ckpt_dir = env_or("MONKEY_CHECKPOINT_DIR");
  st->restored_step = std::strtoll(env_or("MONKEY_CHECKPOINT_STEP", "-1").c_str(), nullptr, 10);
  auto ranks = parse_rank_list(env_or("MONKEY_APP_RANKS", "0"));
  if (ranks.empty() || st->world < 1 || ranks.back() >= st->world)
    return fail("MONKEY_APP_RANKS '" + env_or("MONKEY_APP_RANKS") + "' does not name ranks below "
                "MONKEY_WORLD_SIZE " + std::to_string(st->world));
  auto schema = schema_of(app);
  std::map<std::string, std::string> given;
  for (auto& p : schema.params)
    if (auto v = at->param(p.name))
      given[p.name] = *v;
  if (auto bad = check_params(schema, given); !bad)
    return fail(bad.error());
  st->params = with_defaults(schema, given);
  st->peers.resize(static_cast<size_t>(st->world));
  st->local_ranks = ranks.size();
  st->plane_opts.transport = env_or("MONKEY_DP_TRANSPORT", "auto");
  if (st->plane_opts.transport != "auto" && st->plane_opts.transport != "tcp"
      && st->plane_opts.transport != "shm")
    return fail("MONKEY_DP_TRANSPORT '" + st->plane_opts.transport
                + "' is not a data plane transport: auto, tcp or shm");
  auto dp_timeout = std::strtol(env_or("MONKEY_DP_TIMEOUT_MS", "60000").c_str(), nullptr, 10);
  if (dp_timeout < 100 || dp_timeout > 86400000)
    return fail("MONKEY_DP_TIMEOUT_MS '" + env_or("MONKEY_DP_TIMEOUT_MS")
                + "' is not a timeout between 100 ms and a day (86400000)");
  if (app.uses_data_plane() && app.policy() == failure_policy::rank)
    return fail("the app uses the data plane and the rank failure policy: a restarted rank's "
                "peers would keep their links to the failed one; use the gang policy");
  st->plane_opts.timeout = std::chrono::milliseconds(dp_timeout);
  auto early_mb = std::strtoll(env_or("MONKEY_DP_EARLY_MB", "1024").c_str(), nullptr, 10);
  if (early_mb < 1 || early_mb > (int64_t{1} << 30))
    return fail("MONKEY_DP_EARLY_MB '" + env_or("MONKEY_DP_EARLY_MB")
                + "' is not a size in MB of at least 1");
  st->plane_opts.max_early_bytes = static_cast<uint64_t>(early_mb) << 20;
  // On a --tls cluster the data plane's TCP links are TLS too, unless the job opts out for a
  // trusted fabric (MONKEY_DP_TLS=off: the links stay keyed, not encrypted).
  auto dp_tls = env_or("MONKEY_DP_TLS", "on");
  if (dp_tls != "on" && dp_tls != "off")
    return fail("MONKEY_DP_TLS '" + dp_tls + "' is neither on nor off");
  if (dp_tls == "on" && !env_or("MONKEY_TLS_CERT").empty())
    st->plane_opts.tls = tls_files{env_or("MONKEY_TLS_CERT"), env_or("MONKEY_TLS_KEY"),
                                   env_or("MONKEY_TLS_CA")};

  net_settings ns;
  ns.heartbeat = std::chrono::milliseconds(std::strtol(env_or("MONKEY_HEARTBEAT_MS", "250").c_str(), nullptr, 10));
  ns.connection_timeout = std::chrono::milliseconds(
    std::strtol(env_or("MONKEY_CONNECTION_TIMEOUT_MS", "2000").c_str(), nullptr, 10));
  ns.tls.cert = env_or("MONKEY_TLS_CERT");
  ns.tls.key = env_or("MONKEY_TLS_KEY");
  ns.tls.ca = env_or("MONKEY_TLS_CA");
  host_config cfg{ns};
  caf::actor_system sys{cfg};
  st->sys = &sys;
  int code = 0;
  {
    caf::scoped_actor self{sys};
    std::string host_name;
    uint16_t port = 0;
    auto addr = env_or("MONKEY_NODE_ADDRESS");
    if (auto bad = split_address(addr, host_name, port); !bad)
      return fail("MONKEY_NODE_ADDRESS: " + bad.error());
    auto gw = connect_actor(sys, host_name, port, std::chrono::seconds(10));
    if (!gw)
      return fail("cannot reach its node at " + addr + ": " + describe_connect_error(sys, gw.error(), addr));
    host h{app, st, sys, self, *gw, ranks};
    auto key = from_hex(env_or("MONKEY_APP_KEY"));
    if (key.empty())
      return fail("MONKEY_APP_KEY is missing or not hex: the node gives it to the app host");
    // The data plane's connections prove the gang's secret (every host of the gang has it;
    // the attempt key is this host's own), or this host's key when it runs every rank.
    st->plane_opts.key = st->token.empty() ? key : st->token;
    st->plane_opts.tcp_host = host_name;
    if (auto bad = h.authenticate(key); !bad)
      return fail("the node refused the app host: " + bad.error());
    std::signal(SIGTERM, on_stop_signal);
    std::signal(SIGPIPE, SIG_IGN); // a data plane peer that went away is an error, not a death
    std::signal(SIGINT, on_stop_signal);
    code = h.run(host_name);
  }
  // Leave CAF's teardown out of the exit: the ranks are stopped and the metrics flushed.
  std::fflush(nullptr);
  std::_Exit(code);
}

} // namespace

int run(const definition& app, int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "--describe") {
    std::cout << to_json(schema_of(app)) << "\n";
    return 0;
  }
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    usage(app);
    return 0;
  }
  if (!args.empty() && args[0] != "--host") {
    std::fprintf(stderr, "monkey-app-%s: unknown argument '%s'\n", app.name().c_str(),
                 args[0].c_str());
    usage(app);
    return 2;
  }
  if (args.empty() && !std::getenv("MONKEY_JOB_ID")) {
    usage(app);
    return 2;
  }
  return host_main(app);
}

} // namespace monkey::app
