// SPDX-License-Identifier: Apache-2.0
#include "runtime/dataplane/mesh.hpp"
#include "runtime/dataplane/arena.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cerrno>
#include <fstream>
#include <map>
#include <mutex>
#include <poll.h>
#include <sstream>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace monkey::dp {

namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct host_endpoint {
  std::string machine, tcp, unix_name;
  std::vector<int32_t> ranks;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep))
    out.push_back(cur);
  if (!s.empty() && s.back() == sep)
    out.emplace_back();
  return out;
}

expected<host_endpoint> parse_endpoint(const std::string& text) {
  auto parts = split(text, '|');
  if (parts.size() != 5 || parts[0] != "dp1")
    return failure{"data plane: '" + text + "' is not a data plane endpoint (dp1|machine|tcp|unix|ranks)"};
  host_endpoint e{parts[1], parts[2], parts[3], {}};
  for (auto& r : split(parts[4], ',')) {
    char* end = nullptr;
    auto v = std::strtol(r.c_str(), &end, 10);
    if (r.empty() || *end != '\0' || v < 0)
      return failure{"data plane: endpoint '" + text + "' names a bad rank '" + r + "'"};
    e.ranks.push_back(static_cast<int32_t>(v));
  }
  return e;
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

} // namespace

std::string machine_identity() {
  char ns[128] = {};
  auto n = ::readlink("/proc/self/ns/net", ns, sizeof(ns) - 1);
  return read_line("/proc/sys/kernel/random/boot_id") + "/" + (n > 0 ? std::string(ns, static_cast<size_t>(n)) : "");
}

expected<std::unique_ptr<mesh>> mesh::create(int32_t world, std::vector<int32_t> local,
                                             mesh_options opts) {
  std::unique_ptr<mesh> m(new mesh());
  m->world_ = world;
  std::sort(local.begin(), local.end());
  m->local_ = local;
  m->opts_ = opts;
  auto t = tcp_listener::listen(opts.tcp_host);
  if (!t)
    return failure{t.error()};
  m->tcp_ = std::move(*t);
  auto u = unix_listener::listen();
  if (!u)
    return failure{u.error()};
  m->unix_ = std::move(*u);
  m->machine_ = machine_identity();
  if (opts.tls.enabled()) {
    auto ctx = make_tls_context(opts.tls);
    if (!ctx)
      return failure{ctx.error()};
    m->tls_ = *ctx;
  }
  std::string ranks;
  for (auto r : local)
    ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
  m->endpoint_ = "dp1|" + m->machine_ + "|" + m->tcp_.endpoint() + "|" + m->unix_.name() + "|" + ranks;
  comm_options co;
  co.timeout = opts.timeout;
  co.segment_bytes = opts.segment_bytes;
  co.max_early_bytes = opts.max_early_bytes;
  // The shared arena of registered buffers (MONKEY_DP_ARENA_MB; address space only until
  // buffers use it). Without one every all-reduce takes the rings.
  if (arena::configured_bytes() > 0)
    if (auto a = arena::create(arena::configured_bytes()))
      m->arena_ = *a;
  for (auto r : local) {
    m->comms_[r] = std::make_unique<communicator>(r, world, co);
    m->comms_[r]->use_arena(m->arena_);
  }
  return m;
}

mesh::~mesh() {
  close();
}

communicator* mesh::comm(int32_t r) {
  auto it = comms_.find(r);
  return it == comms_.end() ? nullptr : it->second.get();
}

void mesh::close() {
  for (auto& [r, c] : comms_)
    c->close();
}

status mesh::connect(const std::vector<std::string>& endpoints) {
  std::map<int32_t, host_endpoint> where; // rank → its host
  for (auto& text : endpoints) {
    auto e = parse_endpoint(text);
    if (!e)
      return failure{e.error()};
    for (auto r : e->ranks) {
      if (r >= world_)
        return failure{"data plane: endpoint '" + text + "' names rank " + std::to_string(r)
                       + " of a world of " + std::to_string(world_)};
      if (!where.emplace(r, *e).second)
        return failure{"data plane: two hosts claim rank " + std::to_string(r)};
    }
  }
  for (int32_t r = 0; r < world_; ++r)
    if (!where.count(r))
      return failure{"data plane: no host runs rank " + std::to_string(r)};
  auto is_local = [&](int32_t r) { return comms_.count(r) > 0; };
  const int arena_fd = arena_ ? arena_->fd() : -1;
  auto use_shm = [&](const host_endpoint& e) {
    return opts_.transport == "shm" || (opts_.transport != "tcp" && e.machine == machine_);
  };

  // Two ranks of this host: a ring pair in memory.
  for (auto r : local_)
    for (auto p : local_)
      if (r < p) {
        auto pair = make_local_pair(opts_.ring_bytes, opts_.timeout);
        comms_[r]->attach(p, std::move(pair.first));
        comms_[p]->attach(r, std::move(pair.second));
        // One process: sends by address are read with memcpy (comm.hpp, set_peer_cma).
        comms_[r]->set_peer_cma(p, communicator::same_process, true);
        comms_[p]->set_peer_cma(r, communicator::same_process, true);
        if (arena_) { // one process: its own arena (the alias keeps it alive)
          std::shared_ptr<uint8_t> base(arena_, arena_->base());
          comms_[r]->set_peer_arena(p, base, arena_->bytes());
          comms_[p]->set_peer_arena(r, base, arena_->bytes());
        }
      }

  // Plain TCP pairs get a second connection, the collectives' lane (transport.hpp); TLS
  // links have none (their collectives go frame by frame).
  const bool tcp_lanes = !tls_;
  auto lanes_with = [&](int32_t p) { return tcp_lanes && !use_shm(where.at(p)); };
  // The higher ranks of other hosts dial this one's ranks: accept them meanwhile.
  size_t inbound = 0;
  for (auto r : local_)
    for (int32_t p = 0; p < r; ++p)
      if (!is_local(p))
        inbound += lanes_with(p) ? 2 : 1;
  // A pair's first TCP connection waits here for its lane (or the other way round).
  std::map<std::pair<uint32_t, uint32_t>, tcp_link> tcp_main, tcp_lane;
  std::atomic<clock::rep> until{(clock::now() + opts_.connect_timeout).time_since_epoch().count()};
  auto left_ms = [&] {
    return std::chrono::duration_cast<milliseconds>(clock::time_point(clock::duration(until.load()))
                                                    - clock::now());
  };
  std::mutex mtx;
  std::string accept_error;
  std::thread acceptor([&] {
    size_t got = 0;
    while (got < inbound) {
      auto left = left_ms();
      if (left.count() <= 0) {
        std::lock_guard<std::mutex> guard{mtx};
        accept_error = "data plane: " + std::to_string(inbound - got) + " of "
                       + std::to_string(inbound) + " ranks of other hosts did not connect within "
                       + std::to_string(opts_.connect_timeout.count()) + " ms";
        return;
      }
      pollfd fds[2] = {{tcp_.fd(), POLLIN, 0}, {unix_.fd(), POLLIN, 0}};
      if (::poll(fds, 2, static_cast<int>(std::min<long>(left.count(), 200))) <= 0)
        continue;
      uint32_t from = 0, to = 0;
      std::unique_ptr<channel> ch;
      peer_memory peer_mem;
      std::string why;
      if (fds[0].revents & POLLIN) {
        auto l = tcp_.accept(opts_.key, opts_.timeout);
        if (l) {
          from = l->peer_rank();
          to = l->to_rank();
          bool is_lane = (to & lane_bit) != 0;
          to &= ~lane_bit;
          bool valid = to < static_cast<uint32_t>(world_) && from < to
                       && is_local(static_cast<int32_t>(to)) && !is_local(static_cast<int32_t>(from));
          if (valid && lanes_with(static_cast<int32_t>(from))) {
            auto key = std::make_pair(from, to);
            auto& mine = is_lane ? tcp_lane : tcp_main;
            auto& other = is_lane ? tcp_main : tcp_lane;
            if (mine.count(key) || comm(static_cast<int32_t>(to))->transport(static_cast<int32_t>(from)) != "") {
              std::fprintf(stderr, "data plane: refused a second connection from rank %u for rank %u\n",
                           from, to);
              continue;
            }
            if (!other.count(key)) {
              mine.emplace(key, std::move(*l));
              ++got;
              continue;
            }
            auto o = std::move(other.at(key));
            other.erase(key);
            ch = is_lane ? make_tcp_channel(std::move(o), std::move(*l))
                         : make_tcp_channel(std::move(*l), std::move(o));
          } else if (is_lane) {
            std::fprintf(stderr, "data plane: refused a lane from rank %u for rank %u\n", from, to);
            continue;
          } else if (tls_) {
            auto t = make_tls_channel(std::move(*l), tls_, true, opts_.timeout);
            if (t)
              ch = std::move(*t);
            else
              why = t.error();
          } else {
            ch = make_tcp_channel(std::move(*l));
          }
        } else {
          why = l.error();
        }
      } else if (fds[1].revents & POLLIN) {
        auto a = unix_.accept(opts_.key, opts_.ring_bytes, opts_.timeout, arena_fd);
        if (a) {
          from = a->from;
          to = a->to;
          ch = std::move(a->ch);
          peer_mem = std::move(a->arena);
        } else {
          why = a.error();
        }
      }
      if (!ch) {
        // A refused stranger does not stop the others from joining.
        std::fprintf(stderr, "%s\n", why.c_str());
        continue;
      }
      // Ranks from the wire are checked before they index anything.
      auto* c = to < static_cast<uint32_t>(world_) ? comm(static_cast<int32_t>(to)) : nullptr;
      if (!c || from >= to || is_local(static_cast<int32_t>(from))
          || c->transport(static_cast<int32_t>(from)) != "") {
        std::fprintf(stderr, "data plane: refused a connection from rank %u for rank %u\n", from, to);
        continue;
      }
      c->attach(static_cast<int32_t>(from), std::move(ch));
      if (peer_mem.base)
        c->set_peer_arena(static_cast<int32_t>(from), peer_mem.base, peer_mem.bytes);
      c->set_peer_cma(static_cast<int32_t>(from), peer_mem.read_pid, peer_mem.reads_me);
      ++got;
    }
  });

  std::string dial_error;
  for (auto r : local_)
    for (int32_t p = r + 1; p < world_ && dial_error.empty(); ++p) {
      if (is_local(p))
        continue;
      auto& e = where[p];
      auto left = std::max<milliseconds>(left_ms(), milliseconds(1));
      if (use_shm(e)) {
        peer_memory peer_mem;
        auto ch = dial_shm(e.unix_name, opts_.key, static_cast<uint32_t>(r), static_cast<uint32_t>(p),
                           std::min(left, opts_.timeout), opts_.timeout, arena_fd, &peer_mem);
        if (!ch) {
          dial_error = "rank " + std::to_string(r) + " to rank " + std::to_string(p) + ": " + ch.error();
        } else {
          comms_.at(r)->attach(p, std::move(*ch));
          if (peer_mem.base)
            comms_.at(r)->set_peer_arena(p, peer_mem.base, peer_mem.bytes);
          comms_.at(r)->set_peer_cma(p, peer_mem.read_pid, peer_mem.reads_me);
        }
      } else {
        auto l = tcp_link::dial(e.tcp, opts_.key, static_cast<uint32_t>(r), static_cast<uint32_t>(p),
                                std::min(left, opts_.timeout));
        if (!l) {
          dial_error = "rank " + std::to_string(r) + " to rank " + std::to_string(p) + ": " + l.error();
        } else if (tls_) {
          // The handshake is bounded by the socket's (connect) deadline; transfers by the
          // transfer timeout.
          auto t = make_tls_channel(std::move(*l), tls_, false, opts_.timeout);
          if (!t)
            dial_error = "rank " + std::to_string(r) + " to rank " + std::to_string(p) + ": " + t.error();
          else
            comms_.at(r)->attach(p, std::move(*t));
        } else if (lanes_with(p)) {
          auto lane = tcp_link::dial(e.tcp, opts_.key, static_cast<uint32_t>(r),
                                     static_cast<uint32_t>(p) | lane_bit,
                                     std::max<milliseconds>(std::min(left_ms(), opts_.timeout),
                                                            milliseconds(1)));
          if (!lane) {
            dial_error = "rank " + std::to_string(r) + " to rank " + std::to_string(p)
                         + " (collective lane): " + lane.error();
          } else {
            l->set_timeout(opts_.timeout);
            lane->set_timeout(opts_.timeout);
            comms_.at(r)->attach(p, make_tcp_channel(std::move(*l), std::move(*lane)));
          }
        } else {
          l->set_timeout(opts_.timeout); // from the connect's deadline to the transfer timeout
          comms_.at(r)->attach(p, make_tcp_channel(std::move(*l)));
        }
      }
    }
  if (!dial_error.empty())
    until = clock::now().time_since_epoch().count(); // the acceptor gives up too
  acceptor.join();
  if (!dial_error.empty())
    return failure{"data plane: " + dial_error};
  if (!accept_error.empty())
    return failure{accept_error};
  for (auto& [r, c] : comms_)
    if (auto ok = c->start(); !ok)
      return ok;
  return {};
}

} // namespace monkey::dp
