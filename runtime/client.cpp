// SPDX-License-Identifier: Apache-2.0
#include "runtime/client.hpp"

#include <cstdlib>
#include <fstream>
#include <pwd.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "runtime/auth.hpp"
#include "runtime/envelope.hpp"
#include "runtime/errc.hpp"
#include "runtime/net.hpp"
#include "runtime/net_config.hpp"

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
  client_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  caf::actor gateway;

  expected<std::string> request(const caf::actor& dest, uint16_t v, std::string body,
                                std::chrono::milliseconds timeout) {
    std::string out;
    std::string problem;
    self->request(dest, timeout, envelope{v, std::move(body)})
      .receive([&](std::string& reply) { out = std::move(reply); },
               [&](caf::error& err) { problem = describe(err); });
    if (!problem.empty())
      return failure{problem};
    return out;
  }
};

client::client(const tls_files& tls) : impl_(std::make_unique<impl>(tls)) {}

client::~client() = default;

expected<std::unique_ptr<client>> client::connect(const std::vector<std::string>& addresses,
                                                  const std::string& secret,
                                                  const tls_files& tls) {
  if (tls.enabled())
    if (auto bad = check_tls_files(tls); !bad.empty())
      return failure{"TLS: " + bad};
  std::unique_ptr<client> c{new client(tls)};
  std::string problems;
  for (auto& addr : addresses) {
    std::string host;
    uint16_t port = 0;
    if (auto bad = split_address(addr, host, port); !bad.empty()) {
      problems += (problems.empty() ? "" : "; ") + bad;
      continue;
    }
    auto gw = connect_actor(c->impl_->sys, host, port);
    if (!gw) {
      problems += (problems.empty() ? "" : "; ")
                  + describe_connect_error(c->impl_->sys, gw.error(), addr);
      continue;
    }
    c->impl_->gateway = *gw;
    c->address_ = addr;
    // Challenge-response: the node sends a nonce, we MAC it, it MACs ours back.
    auto hello = c->impl_->request(*gw, static_cast<uint16_t>(verb::hello), encode(hello_request{}),
                                   std::chrono::seconds(10));
    if (!hello)
      return failure{addr + ": " + hello.error()};
    auto h = decode<hello_reply>(*hello, "hello");
    if (!h)
      return failure{addr + ": " + h.error()};
    auth_request auth;
    auth.client_nonce = make_nonce();
    auth.user = current_user();
    auth.host = current_host();
    auth.proof = client_proof(secret, h->nonce, auth.client_nonce, auth.user);
    auto ok = c->impl_->request(*gw, static_cast<uint16_t>(verb::auth), encode(auth),
                                std::chrono::seconds(10));
    if (!ok)
      return failure{addr + ": " + ok.error()};
    auto proof = decode<auth_reply>(*ok, "auth");
    if (!proof || !equal_digest(proof->proof, server_proof(secret, h->nonce, auth.client_nonce)))
      return failure{addr + ": the node could not prove it knows the cluster secret"};
    return c;
  }
  return failure{problems.empty() ? "no node address given" : problems};
}

expected<std::string> client::call(verb v, const std::string& body,
                                   std::chrono::milliseconds timeout) {
  return impl_->request(impl_->gateway, static_cast<uint16_t>(v), body, timeout);
}

} // namespace monkey
