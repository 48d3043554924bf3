// SPDX-License-Identifier: Apache-2.0
#include "runtime/client/client.hpp"

#include <cstdlib>
#include <fstream>
#include <thread>
#include <pwd.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "runtime/net/auth.hpp"
#include "runtime/wire/envelope.hpp"
#include "runtime/errc.hpp"
#include "runtime/net/net.hpp"
#include "runtime/net/net_config.hpp"

namespace monkey {

const char* to_string(verb v) {
  switch (v) {
    case verb::hello: return "hello";
    case verb::auth: return "auth";
    case verb::submit: return "submit";
    case verb::list: return "jobs";
    case verb::show: return "show";
    case verb::logs: return "logs";
    case verb::cancel: return "cancel";
    case verb::why: return "why";
    case verb::status: return "status";
    case verb::devices: return "devices";
    case verb::nodes: return "nodes";
    case verb::tree: return "tree";
    case verb::kill_actor: return "kill";
    case verb::submit_tasks: return "tasks submit";
    case verb::list_tasks: return "tasks";
    case verb::wait_tasks: return "tasks wait";
    case verb::peer_join: return "peer join";
    case verb::peer_ping: return "peer ping";
    case verb::peer_ping_req: return "peer ping-req";
    case verb::peer_replicate: return "peer replicate";
    case verb::drain: return "drain";
    case verb::peer_digest: return "peer digest";
    case verb::peer_fetch: return "peer fetch";
    case verb::peer_reserve: return "peer reserve";
    case verb::peer_withdraw: return "peer withdraw";
    case verb::peer_metrics: return "peer metrics";
    case verb::remove: return "rm";
    case verb::peer_forget: return "peer forget";
    case verb::peer_metric_pull: return "peer metric pull";
    case verb::peer_lease: return "peer lease";
    case verb::peer_gang_start: return "peer gang start";
    case verb::peer_gang_poll: return "peer gang poll";
    case verb::app_report: return "app report";
    case verb::app_ready: return "app ready";
    case verb::peer_ckpt_push: return "peer checkpoint push";
    case verb::peer_ckpt_list: return "peer checkpoint list";
    case verb::app_checkpoint: return "app checkpoint";
    case verb::checkpoints: return "checkpoints";
    case verb::ship_have: return "ship have";
    case verb::ship_put: return "ship put";
    case verb::ship_get: return "ship get";
    case verb::peer_store_refs: return "peer store refs";
  }
  return "unknown";
}

std::string monkey_home() {
  if (auto* h = std::getenv("MONKEY_HOME"); h && *h)
    return h;
  const char* home = std::getenv("HOME");
  if (!home || !*home) {
    auto* pw = ::getpwuid(::getuid());
    home = pw ? pw->pw_dir : "/tmp";
  }
  return std::string(home) + "/.monkey";
}

std::string current_user() {
  if (auto* u = std::getenv("USER"); u && *u)
    return u;
  if (auto* pw = ::getpwuid(::getuid()))
    return pw->pw_name;
  return std::to_string(::getuid());
}

std::string current_host() {
  char hostname[256] = {0};
  ::gethostname(hostname, sizeof(hostname) - 1);
  return hostname;
}

namespace {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text) {
    if (c == ',' || c == '\n' || c == ' ') {
      if (!cur.empty())
        out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty())
    out.push_back(cur);
  return out;
}

} // namespace

std::vector<std::string> find_addresses(const std::string& flag) {
  if (!flag.empty())
    return split_list(flag);
  if (auto* a = std::getenv("MONKEY_ADDRESS"); a && *a)
    return split_list(a);
  // The cluster file (written by `monkey up`), else the address file of a node started
  // with the default data directory.
  for (auto* file : {"/cluster", "/node/address"}) {
    std::ifstream in(monkey_home() + file);
    if (!in)
      continue;
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto list = split_list(text);
    if (!list.empty())
      return list;
  }
  return {"localhost:4700"};
}

std::string find_secret_file(const std::string& flag) {
  if (!flag.empty())
    return flag;
  if (auto* s = std::getenv("MONKEY_SECRET_FILE"); s && *s)
    return s;
  return monkey_home() + "/secret";
}

expected<std::string> find_client_key(const std::string& token_flag,
                                      const std::string& secret_flag) {
  // What is named explicitly wins (flags, then the environment), then MONKEY_HOME's files.
  auto from_secret = [](const std::string& path) -> expected<std::string> {
    auto secret = load_secret(path, false);
    if (!secret)
      return failure{secret.error()};
    return client_token(*secret);
  };
  if (!token_flag.empty())
    return load_token(token_flag);
  if (!secret_flag.empty())
    return from_secret(secret_flag);
  if (auto* t = std::getenv("MONKEY_TOKEN_FILE"); t && *t)
    return load_token(t);
  if (auto* s = std::getenv("MONKEY_SECRET_FILE"); s && *s)
    return from_secret(s);
  auto home_token = monkey_home() + "/token";
  if (::access(home_token.c_str(), F_OK) == 0)
    return load_token(home_token);
  auto home_secret = monkey_home() + "/secret";
  if (::access(home_secret.c_str(), F_OK) != 0)
    return failure{"no client token (" + home_token + ") and no cluster secret (" + home_secret
                   + "): is a node running? Start a local cluster with `monkey up 3`, or a "
                     "node with `monkey-runtime`; for a cluster elsewhere give --token-file "
                     "(the `token` file beside its secret) or --address"};
  return from_secret(home_secret);
}

namespace {

struct client_config : caf::actor_system_config {
  explicit client_config(const tls_files& tls) {
    net_settings s;
    s.tls = tls;
    apply_network_config(*this, s);
  }
};

} // namespace

tls_files find_tls_files(const std::string& flag_dir) {
  std::string dir = flag_dir;
  if (dir.empty())
    if (auto* d = std::getenv("MONKEY_TLS_DIR"); d && *d)
      dir = d;
  if (dir.empty()) {
    // `monkey up --tls` leaves the folder of the cluster's certificates here.
    std::ifstream in(monkey_home() + "/cluster.tls");
    std::getline(in, dir);
  }
  if (dir.empty())
    return {};
  auto* name = std::getenv("MONKEY_TLS_NAME");
  return tls_files_in(dir, name && *name ? name : "client");
}

struct client::impl {
  explicit impl(const tls_files& tls) : cfg(tls) {}

  ~impl() {
    // CAF 0.17's BASP broker spawns a hidden "spawn server" for each node it learns of
    // (basp_broker::learned_new_node) and only kills it, asynchronously, in its own
    // on_exit during the middleman's stop. The spawn server's down message then often
    // lands in the mailbox of the broker that has just finished, and the broker, its
    // connection state and the spawn server are never freed (LeakSanitizer reported it in
    // about 2% of CLI runs under load; libcaf_io 0.17.6, basp_broker.cpp on_exit). The
    // spawn servers are the only actors the middleman registers by id here besides
    // `self`: they are stopped first, while the broker still runs and takes their exit.
    // What is left is rarer (about 1 in 500 runs under a loaded machine with ASan): the
    // broker alone, kept by a reference CAF's multiplexer still holds as it stops; memory
    // the process returns as it exits (docs/testing.md, Sanitizers).
    gateway = nullptr;
    // A connection abandoned at its deadline (a frozen node) is closed by CAF's heartbeat
    // within connect_settle_time; going down before that leaks the BASP broker with it.
    if (abandoned_connect)
      std::this_thread::sleep_for(connect_settle_time(sys));
    std::vector<caf::actor> spawned;
    for (caf::actor_id id = 1; id <= sys.latest_actor_id(); ++id)
      if (id != self->id())
        if (auto a = sys.registry().get<caf::actor>(id))
          spawned.push_back(a);
    for (auto& a : spawned) {
      self->monitor(a);
      self->send_exit(a, caf::exit_reason::kill);
    }
    for (size_t i = 0; i < spawned.size(); ++i) {
      bool timed_out = false;
      self->receive([](const caf::down_msg&) {},
                    caf::after(std::chrono::seconds(1)) >> [&] { timed_out = true; });
      if (timed_out)
        break; // never wait on CAF at exit longer than that
    }
    // The broker monitors them too: one request through its mailbox (FIFO) lets it take
    // their down messages before it is stopped; one arriving as it stops keeps it alive.
    if (!spawned.empty())
      if (auto basp = sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP")))
        self->request(basp, std::chrono::seconds(1), caf::get_atom::value, sys.node())
          .receive([](caf::node_id&, std::string&, uint16_t) {}, [](caf::error&) {});
  }

  client_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  caf::actor gateway;

  caf::error last_error; ///< of the last failed request
  bool abandoned_connect = false; ///< a connect_actor gave up while CAF still tried

  expected<std::string> request(const caf::actor& dest, uint16_t v, std::string body,
                                std::chrono::milliseconds timeout) {
    std::string out;
    std::string problem;
    last_error = caf::error{};
    self->request(dest, timeout, envelope{v, std::move(body)})
      .receive([&](std::string& reply) { out = std::move(reply); },
               [&](caf::error& err) {
                 problem = err == caf::sec::request_timeout
                             ? "the node did not answer within "
                                 + std::to_string(timeout.count() / 1000.0).substr(0, 4) + " s"
                             : describe(err);
                 last_error = std::move(err);
               });
    if (!problem.empty())
      return failure{problem};
    return out;
  }

  credentials who;
  std::chrono::milliseconds timeout{5000};

  /// Challenge-response with the current gateway: the node sends a nonce, we MAC it with
  /// our role's key, it MACs ours back. A failure names the address.
  expected<bool> authenticate(const std::string& addr) {
    hello_request hreq;
    hreq.role = who.role;
    hreq.attempt = who.attempt;
    auto hello = request(gateway, static_cast<uint16_t>(verb::hello), encode(hreq), timeout);
    if (!hello)
      return failure{addr + ": " + hello.error()};
    auto h = decode<hello_reply>(*hello, "hello");
    if (!h) {
      last_error = caf::error{};
      return failure{addr + ": " + h.error()};
    }
    auth_request auth;
    auth.client_nonce = make_nonce();
    auth.user = current_user();
    auth.host = current_host();
    auth.proof = client_proof(who.key, h->nonce, auth.client_nonce, auth.user);
    auto ok = request(gateway, static_cast<uint16_t>(verb::auth), encode(auth), timeout);
    if (!ok)
      return failure{addr + ": " + ok.error()};
    auto proof = decode<auth_reply>(*ok, "auth");
    if (!proof || !equal_digest(proof->proof, server_proof(who.key, h->nonce, auth.client_nonce))) {
      last_error = caf::error{};
      return failure{addr + ": the node could not prove it knows the cluster secret"};
    }
    return true;
  }

  bool unauthenticated() const {
    return is(last_error, errc::unauthenticated);
  }

  /// The node answered and said no (wrong key, another protocol version): asking the next
  /// address would only hear the same.
  bool refused() const {
    return is(last_error, errc::refused) || is(last_error, errc::bad_request);
  }
};

client::client(const tls_files& tls) : impl_(std::make_unique<impl>(tls)), tls_(tls.enabled()) {}

client::~client() {
  // CAF 0.17's TLS transport keeps its multiplexer thread looping while a handshake with a
  // frozen node is pending, and tearing the actor system down joins that thread: a client
  // that ever dialed such a node would hang in its destructor (the CLI at its exit). Its
  // actor system is left to the end of the process instead.
  if (tls_)
    (void)impl_.release();
}

expected<std::unique_ptr<client>> client::connect(const std::vector<std::string>& addresses,
                                                  const credentials& who, const tls_files& tls,
                                                  std::chrono::milliseconds timeout) {
  if (tls.enabled())
    if (auto bad = check_tls_files(tls); !bad)
      return failure{"TLS: " + bad.error()};
  std::unique_ptr<client> c{new client(tls)};
  std::string problems;
  auto note = [&](const std::string& p) { problems += (problems.empty() ? "" : "; ") + p; };
  // Each address in turn, each step with a deadline: a node that is down, frozen or
  // unreachable costs at most `timeout`, and the next one is tried.
  for (auto& addr : addresses) {
    std::string host;
    uint16_t port = 0;
    if (auto bad = split_address(addr, host, port); !bad) {
      note(bad.error());
      continue;
    }
    auto gw = connect_actor(c->impl_->sys, host, port, timeout);
    if (!gw && gw.error() == caf::sec::request_timeout)
      c->impl_->abandoned_connect = true;
    if (!gw) {
      note(describe_connect_error(c->impl_->sys, gw.error(), addr));
      continue;
    }
    c->impl_->gateway = *gw;
    c->address_ = addr;
    c->impl_->who = who;
    c->impl_->timeout = timeout;
    auto ok = c->impl_->authenticate(addr);
    if (ok)
      return c;
    if (c->impl_->refused() || c->impl_->last_error == caf::error{})
      return failure{ok.error()};
    note(ok.error());
  }
  return failure{problems.empty() ? "no node address given" : problems};
}

expected<std::string> client::call(verb v, const std::string& body,
                                   std::chrono::milliseconds timeout) {
  auto r = impl_->request(impl_->gateway, static_cast<uint16_t>(v), body, timeout);
  // The node forgot the session (its gateway was restarted): authenticate again, once.
  if (!r && impl_->unauthenticated() && impl_->authenticate(address_))
    r = impl_->request(impl_->gateway, static_cast<uint16_t>(v), body, timeout);
  return r;
}

} // namespace monkey
