// SPDX-License-Identifier: Apache-2.0
#include "actors/checkpoints.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <caf/all.hpp>

#include "actors/fan_out.hpp"
#include "actors/membership/membership.hpp"
#include "actors/messages.hpp"
#include "runtime/checkpoint/store.hpp"
#include "runtime/checkpoint/transfer.hpp"
#include "runtime/dataplane/tls_channel.hpp"
#include "runtime/errc.hpp"
#include "runtime/logging.hpp"
#include "runtime/wire/atoms.hpp"
#include "runtime/wire/envelope.hpp"
#include "runtime/wire/messages/client.hpp"

namespace monkey {

namespace {

using run_atom = caf::atom_constant<caf::atom("m_ckrun")>;

/// Steps a peer lists (newest first): enough to find the newest complete one.
constexpr size_t listed_steps = 3;

struct checkpoints_state {
  checkpoints_config cfg;
  std::shared_ptr<ckpt::store> store;
  std::shared_ptr<ckpt::blob_server> server;
  ckpt::tls_ptr tls; ///< on a --tls cluster
  std::string endpoint;
  caf::actor membership;
  cluster_view view{""};
  std::shared_ptr<spdlog::logger> log;
  static inline const char* name = "checkpoints";
};

using checkpoints_actor = caf::stateful_actor<checkpoints_state>;

/// Runs `work` on a thread of its own (a detached actor: file and socket I/O never block
/// this actor), then `then` with its result here.
template <class T>
void offload(checkpoints_actor* self, std::function<T()> work, std::function<void(T&)> then) {
  auto out = std::make_shared<std::optional<T>>();
  auto worker = self->spawn<caf::detached>([work, out](caf::event_based_actor* w) -> caf::behavior {
    return {
      [=](run_atom) {
        *out = work();
        w->quit();
        return true;
      },
    };
  });
  self->request(worker, caf::infinite, run_atom::value)
    .then([out, then](bool) { then(**out); },
          [out, then](caf::error&) {
            if (*out)
              then(**out);
          });
}

/// How long a holder may take to fetch `bytes` (at least 30 s; 20 MB/s at the slowest).
std::chrono::milliseconds transfer_timeout(uint64_t bytes) {
  return std::chrono::milliseconds(30000 + bytes / (20 * 1000));
}


/// The nodes a new piece goes to: the job's alive holders other than this node, filled up
/// with other alive members when fewer holders than min(R, alive) are alive.
std::vector<std::string> push_targets(const checkpoints_state& st,
                                      const std::vector<std::string>& holders) {
  auto self = st.cfg.node;
  std::vector<std::string> out;
  size_t alive_holders = 0;
  for (auto& h : holders)
    if (st.view.alive(h)) {
      ++alive_holders;
      if (h != self)
        out.push_back(h);
    }
  auto alive = st.view.alive_nodes();
  size_t wanted = std::min(std::max<size_t>(holders.size(), 1), alive.size());
  for (auto& n : alive) {
    if (alive_holders >= wanted)
      break;
    if (n == self || std::find(holders.begin(), holders.end(), n) != holders.end())
      continue;
    out.push_back(n);
    ++alive_holders;
  }
  return out;
}

void on_save(checkpoints_actor* self, caf::response_promise rp, ckpt_save_args args) {
  auto& st = self->state;
  auto started = std::chrono::steady_clock::now();
  ckpt::manifest m;
  m.job = args.job.str();
  m.step = args.step;
  m.serial = static_cast<uint64_t>(
    std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::system_clock::now().time_since_epoch()).count());
  m.world = args.world;
  m.label = args.label;
  auto store = st.store;
  auto src = args.src;
  auto move = args.move;
  offload<expected<ckpt::manifest>>(
    self,
    [store, m, src, move]() -> expected<ckpt::manifest> {
      auto done = store->commit_dir(m, src, move);
      if (done)
        store->prune(m.job);
      return done;
    },
    [=](expected<ckpt::manifest>& done) mutable {
      auto& st = self->state;
      if (!done) {
        st.log->warn("job {}: checkpoint step {} not saved: {}", args.job.short_str(), args.step,
                     done.error());
        return rp.deliver(make_error(errc::bad_request, done.error()));
      }
      auto piece = *done;
      auto targets = push_targets(st, args.holders);
      ckpt_push_request req;
      req.piece = piece;
      req.endpoint = st.endpoint;
      req.ticket = st.server->grant(piece);
      auto nodes = std::make_shared<std::vector<std::string>>(1, st.cfg.node);
      auto problems = std::make_shared<std::vector<std::string>>();
      fan_out(
        self, st.membership, targets, verb::peer_ckpt_push, encode(req),
        transfer_timeout(piece.bytes()),
        [=](const peer_answer& a) {
          if (a)
            nodes->push_back(a.node);
          else
            problems->push_back(a.node + ": " + describe(a.err));
        },
        [=]() mutable {
          auto& st = self->state;
          auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - started).count();
          if (!problems->empty()) {
            std::string why;
            for (auto& p : *problems)
              why += (why.empty() ? "" : "; ") + p;
            st.log->warn("job {}: checkpoint step {} ({} bytes) is on {} of {} nodes: {}",
                         args.job.short_str(), piece.step, piece.bytes(), nodes->size(),
                         targets.size() + 1, why);
            return rp.deliver(make_error(
              errc::under_replicated,
              "checkpoint step " + std::to_string(piece.step) + " of job " + args.job.short_str()
                + " is stored on " + std::to_string(nodes->size()) + " of "
                + std::to_string(targets.size() + 1) + " nodes (" + why
                + "): it does not count yet"));
          }
          st.log->info("job {}: checkpoint step {} ({}, {} bytes) stored on {} node(s) in {} ms",
                       args.job.short_str(), piece.step, piece.label, piece.bytes(),
                       nodes->size(), ms);
          rp.deliver(ckpt_saved{piece.step, piece.bytes(), *nodes, ms});
        });
    });
}

void on_push(checkpoints_actor* self, caf::response_promise rp, ckpt_push_request req) {
  auto store = self->state.store;
  auto tls = self->state.tls;
  offload<expected<ckpt::manifest>>(
    self,
    [store, tls, req]() -> expected<ckpt::manifest> {
      auto got = ckpt::pull(*store, req.endpoint, req.ticket, req.piece, tls);
      if (got)
        store->prune(req.piece.job);
      return got;
    },
    [=](expected<ckpt::manifest>& got) mutable {
      if (!got) {
        self->state.log->warn("{}", got.error());
        return rp.deliver(make_error(errc::unavailable, got.error()));
      }
      SPDLOG_LOGGER_DEBUG(self->state.log, "job {}: holds checkpoint step {} ({} bytes)",
                          req.piece.job, req.piece.step, req.piece.bytes());
      rp.deliver(encode(true));
    });
}

/// This node's pieces of `job` (its newest steps), each with a ticket.
ckpt_list_reply local_list(checkpoints_state& st, const std::string& job) {
  ckpt_list_reply out;
  out.node = st.cfg.node;
  out.endpoint = st.endpoint;
  auto pieces = st.store->list(job);
  std::set<int64_t> steps;
  for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) {
    steps.insert(it->step);
    if (steps.size() > listed_steps)
      break;
    out.pieces.push_back(ckpt_offer{*it, st.server->grant(*it)});
  }
  return out;
}

/// Asks every alive member (this node too) for its pieces of `job`.
void gather(checkpoints_actor* self, const std::string& job,
            std::function<void(std::vector<ckpt_list_reply>, size_t asked)> then) {
  auto& st = self->state;
  auto replies = std::make_shared<std::vector<ckpt_list_reply>>();
  replies->push_back(local_list(st, job));
  auto others = st.view.others_alive();
  fan_out(
    self, st.membership, others, verb::peer_ckpt_list, encode(ckpt_list_request{job}),
    std::chrono::seconds(5),
    [=](const peer_answer& a) {
      if (!a)
        return;
      if (auto r = decode<ckpt_list_reply>(*a.body, "peer checkpoint list"))
        replies->push_back(std::move(*r));
    },
    [=] { then(std::move(*replies), others.size() + 1); });
}

struct restore_work {
  ckpt::restore_plan plan;
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> sources; ///< piece → (endpoint, ticket)
};

std::string piece_key(const ckpt::manifest& m) {
  return m.dir_name();
}

/// Fetches the plan's pieces that are not here and copies every piece into `dest`.
expected<uint64_t> carry_out(ckpt::store& store, const ckpt::tls_ptr& tls, const restore_work& work,
                             const std::string& dest) {
  uint64_t bytes = 0;
  for (auto& piece : work.plan.pieces) {
    if (!store.has(piece)) {
      std::string why = "no member offers it";
      bool ok = false;
      auto it = work.sources.find(piece_key(piece));
      if (it != work.sources.end())
        for (auto& [endpoint, ticket] : it->second) {
          auto got = ckpt::pull(store, endpoint, ticket, piece, tls);
          if (got) {
            ok = true;
            break;
          }
          why = got.error();
        }
      if (!ok)
        return failure{"checkpoint step " + std::to_string(piece.step) + " (" + piece.label
                       + ") could not be fetched: " + why};
    }
    if (auto copied = ckpt::copy_out(store, piece, dest); !copied)
      return failure{copied.error()};
    bytes += piece.bytes();
  }
  return bytes;
}

void restore_job(checkpoints_actor* self, caf::response_promise rp, ckpt_restore_args args,
                 job_id which, bool last) {
  gather(self, which.str(), [=](std::vector<ckpt_list_reply> replies, size_t asked) mutable {
    auto& st = self->state;
    restore_work work;
    std::vector<ckpt::manifest> all;
    for (auto& r : replies)
      for (auto& o : r.pieces) {
        if (o.piece.job != which.str())
          continue;
        all.push_back(o.piece);
        if (r.node != st.cfg.node)
          work.sources[piece_key(o.piece)].emplace_back(r.endpoint, o.ticket);
      }
    work.plan = ckpt::plan_restore(all);
    auto note = std::to_string(replies.size()) + " of " + std::to_string(asked)
                + " members answered";
    if (work.plan.step < 0) {
      if (!last && !args.from.empty())
        return restore_job(self, rp, args, args.from, true);
      ckpt_restored none;
      none.note = note;
      return rp.deliver(none);
    }
    auto store = st.store;
    auto dest = args.dest;
    offload<expected<uint64_t>>(
      self, [store, tls = st.tls, work, dest] { return carry_out(*store, tls, work, dest); },
      [=](expected<uint64_t>& bytes) mutable {
        auto& st = self->state;
        if (!bytes) {
          st.log->warn("job {}: cannot restore: {}", args.job.short_str(), bytes.error());
          return rp.deliver(make_error(errc::unavailable, bytes.error()));
        }
        ckpt_restored out;
        out.step = work.plan.step;
        out.source = which;
        out.bytes = *bytes;
        out.note = note;
        st.log->info("job {}: restored checkpoint step {} of job {} ({} bytes, {} piece(s); {})",
                     args.job.short_str(), out.step, which.short_str(), out.bytes,
                     work.plan.pieces.size(), note);
        rp.deliver(out);
      });
  });
}

/// `monkey checkpoints JOB`: every alive member's pieces of the job, by piece, with the
/// members that hold each, and the step a new attempt would resume at.
void on_status(checkpoints_actor* self, caf::typed_response_promise<std::string> rp,
               const std::string& job) {
  gather(self, job, [=](std::vector<ckpt_list_reply> replies, size_t asked) mutable {
    ckpt_status_reply out;
    out.asked = static_cast<int32_t>(asked);
    out.answered = static_cast<int32_t>(replies.size());
    std::vector<ckpt::manifest> all;
    std::map<std::string, size_t> index;
    for (auto& r : replies)
      for (auto& o : r.pieces) {
        if (o.piece.job != job)
          continue;
        all.push_back(o.piece);
        auto key = piece_key(o.piece);
        if (!index.count(key)) {
          index[key] = out.pieces.size();
          out.pieces.push_back(ckpt_status_piece{o.piece, {}});
        }
        out.pieces[index[key]].nodes.push_back(r.node);
      }
    std::sort(out.pieces.begin(), out.pieces.end(), [](auto& a, auto& b) {
      return a.piece.step != b.piece.step ? a.piece.step > b.piece.step
                                          : a.piece.serial > b.piece.serial;
    });
    out.complete_step = ckpt::plan_restore(all).step;
    rp.deliver(encode(out));
  });
}

caf::result<std::string> on_envelope(checkpoints_actor* self, const envelope& env) {
  auto& st = self->state;
  switch (static_cast<verb>(env.verb)) {
    case verb::peer_ckpt_push: {
      auto req = decode<ckpt_push_request>(env.body, "peer checkpoint push");
      if (!req)
        return make_error(errc::bad_request, req.error());
      auto rp = self->make_response_promise<std::string>();
      on_push(self, rp, std::move(*req));
      return rp;
    }
    case verb::peer_ckpt_list: {
      auto req = decode<ckpt_list_request>(env.body, "peer checkpoint list");
      if (!req)
        return make_error(errc::bad_request, req.error());
      return encode(local_list(st, req->job));
    }
    case verb::checkpoints: {
      auto req = decode<ckpt_list_request>(env.body, "checkpoints");
      if (!req)
        return make_error(errc::bad_request, req.error());
      auto rp = self->make_response_promise<std::string>();
      on_status(self, rp, req->job);
      return rp;
    }
    default:
      return make_error(errc::bad_request, "the checkpoints actor does not answer verb "
                                             + std::to_string(env.verb));
  }
}

caf::behavior checkpoints_impl(checkpoints_actor* self, checkpoints_config cfg) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.log = logger("checkpoints");
  st.view = cluster_view{st.cfg.node};
  st.store = std::make_shared<ckpt::store>(st.cfg.root, st.cfg.max_bytes, st.cfg.keep_steps);
  if (st.cfg.tls.enabled()) {
    if (auto ctx = dp::make_tls_context(st.cfg.tls))
      st.tls = *ctx;
    else
      st.log->error("{}: checkpoints cannot be replicated from or to this node", ctx.error());
  }
  st.server = std::make_shared<ckpt::blob_server>(*st.store, st.tls);
  auto host = st.cfg.listen_host.empty() ? std::string("0.0.0.0") : st.cfg.listen_host;
  if (auto ep = st.server->start(host)) {
    auto port = ep->substr(ep->rfind(':') + 1);
    auto shown = !st.cfg.advertise_host.empty() ? st.cfg.advertise_host : ep->substr(0, ep->rfind(':'));
    st.endpoint = shown + ":" + port;
    st.log->info("checkpoint store {} (pieces up to {} MB); blob server at {} ({})", st.cfg.root,
                 st.cfg.max_bytes >> 20, st.endpoint, st.tls ? "tls" : "keyed tcp");
  } else {
    st.log->error("{}: checkpoints cannot be replicated from this node", ep.error());
  }
  self->system().registry().put(caf::atom_from_string(checkpoints_name), self);
  self->set_down_handler([=](const caf::down_msg& dm) {
    auto& st = self->state;
    if (st.membership && st.membership.address() == dm.source) {
      st.membership = nullptr;
      self->delayed_send(self, std::chrono::milliseconds(100), atoms::subscribe::value);
    }
  });
  self->attach_functor([server = st.server, store = st.store] { server->stop(); });
  subscribe_members(self, self->state.membership);
  return {
    [=](const envelope& env) { return on_envelope(self, env); },
    [=](atoms::ckpt_save, ckpt_save_args& args) {
      auto rp = self->make_response_promise<ckpt_saved>();
      on_save(self, rp, std::move(args));
      return rp;
    },
    [=](atoms::ckpt_restore, ckpt_restore_args& args) {
      auto rp = self->make_response_promise<ckpt_restored>();
      restore_job(self, rp, args, args.job, args.from.empty());
      return rp;
    },
    [=](atoms::ckpt_forget, const job_id& id) { self->state.store->forget(id.str()); },
    [=](atoms::subscribe) { subscribe_members(self, self->state.membership); },
    [=](atoms::members, member_list& ms, bool majority, uint32_t agreed, uint32_t agreed_alive) {
      self->state.view.update(std::move(ms), majority, agreed, agreed_alive);
    },
    [=](atoms::fence, const std::string&) { return true; },
  };
}

} // namespace

caf::actor spawn_checkpoints(caf::actor_system& sys, checkpoints_config cfg) {
  return sys.spawn(checkpoints_impl, std::move(cfg));
}

} // namespace monkey
