// SPDX-License-Identifier: Apache-2.0
#include "actors/checkpoints.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <unistd.h>

#include <caf/all.hpp>

#include "actors/fan_out.hpp"
#include "actors/membership/membership.hpp"
#include "actors/messages.hpp"
#include "runtime/checkpoint/store.hpp"
#include "runtime/checkpoint/transfer.hpp"
#include "runtime/dataplane/tls_channel.hpp"
#include "runtime/errc.hpp"
#include "runtime/logging.hpp"
#include "runtime/ownership.hpp"
#include "runtime/ship/bundle.hpp"
#include "runtime/supervision/supervisor.hpp"
#include "runtime/wire/atoms.hpp"
#include "runtime/wire/envelope.hpp"
#include "runtime/wire/messages/client.hpp"

namespace monkey {

namespace {

using run_atom = caf::atom_constant<caf::atom("m_ckrun")>;

/// Steps a peer lists (newest first): enough to find the newest complete one.
constexpr size_t listed_steps = 3;

/// A bundle coming in from a client (ship_put), chunk by chunk.
struct upload {
  std::string path; ///< the staging file
  int fd = -1;
  uint64_t received = 0;
  uint64_t total = 0;
  std::string label;
  std::chrono::steady_clock::time_point touched;
};

struct checkpoints_state {
  checkpoints_config cfg;
  std::map<std::string, upload> uploads; ///< by "<sha256>.<upload id>"
  std::shared_ptr<ckpt::store> store;
  std::shared_ptr<ckpt::blob_server> server;
  ckpt::tls_ptr tls; ///< on a --tls cluster
  std::string endpoint;
  caf::actor membership;
  cluster_view view{""};
  std::shared_ptr<spdlog::logger> log;
  static inline const char* name = "checkpoints";
  ~checkpoints_state() {
    for (auto& [key, u] : uploads)
      if (u.fd >= 0)
        ::close(u.fd);
  }
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

/// Where a piece is after push_piece: this node and the targets that stored it, and what
/// the others answered.
struct copies {
  std::vector<std::string> nodes;
  std::vector<std::string> problems; ///< "NODE: why"
};

/// Has every node of `targets` fetch `piece` from this node's blob server and store it
/// (peer_ckpt_push), then `then` with the outcome.
void push_piece(checkpoints_actor* self, const ckpt::manifest& piece,
                const std::vector<std::string>& targets, std::function<void(copies)> then) {
  auto& st = self->state;
  ckpt_push_request req;
  req.piece = piece;
  req.endpoint = st.endpoint;
  req.ticket = st.server->grant(piece);
  auto out = std::make_shared<copies>();
  out->nodes.push_back(st.cfg.node);
  fan_out(
    self, st.membership, targets, verb::peer_ckpt_push, encode(req),
    transfer_timeout(piece.bytes()),
    [=](const peer_answer& a) {
      if (a)
        out->nodes.push_back(a.node);
      else
        out->problems.push_back(a.node + ": " + describe(a.err));
    },
    [=] { then(std::move(*out)); });
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
      push_piece(self, piece, targets, [=](copies c) mutable {
        auto& st = self->state;
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - started).count();
        if (!c.problems.empty()) {
          std::string why;
          for (auto& p : c.problems)
            why += (why.empty() ? "" : "; ") + p;
          st.log->warn("job {}: checkpoint step {} ({} bytes) is on {} of {} nodes: {}",
                       args.job.short_str(), piece.step, piece.bytes(), c.nodes.size(),
                       targets.size() + 1, why);
          return rp.deliver(make_error(
            errc::under_replicated,
            "checkpoint step " + std::to_string(piece.step) + " of job " + args.job.short_str()
              + " is stored on " + std::to_string(c.nodes.size()) + " of "
              + std::to_string(targets.size() + 1) + " nodes (" + why
              + "): it does not count yet"));
        }
        st.log->info("job {}: checkpoint step {} ({}, {} bytes) stored on {} node(s) in {} ms",
                     args.job.short_str(), piece.step, piece.label, piece.bytes(),
                     c.nodes.size(), ms);
        rp.deliver(ckpt_saved{piece.step, piece.bytes(), c.nodes, ms});
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
  // Listed is in use: a client about to submit a job with a bundle the cluster holds, a
  // restore. The collection takes only entries unwritten and unlisted for --store-keep.
  if (!pieces.empty())
    st.store->touch(job);
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


// ---- shipped bundles (docs/shipping.md) --------------------------------------------------

constexpr const char* bundle_file = "bundle";
/// Copies of a bundle: the node it was uploaded to and two more alive members.
constexpr size_t ship_copies = 3;

bool is_sha256(const std::string& s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

/// The piece of this node's store that holds the bundle `sha`, if any.
std::optional<ckpt::manifest> local_bundle(const ckpt::store& s, const std::string& sha) {
  for (auto& p : s.list(ship_store_entry(sha)))
    if (p.files.size() == 1 && p.files[0].name == bundle_file && p.files[0].sha256 == sha)
      return p;
  return std::nullopt;
}

std::string incoming_dir(const checkpoints_state& st) {
  return st.cfg.root + "-incoming";
}

void drop_upload(checkpoints_state& st, const std::string& key) {
  auto it = st.uploads.find(key);
  if (it == st.uploads.end())
    return;
  if (it->second.fd >= 0)
    ::close(it->second.fd);
  ::unlink(it->second.path.c_str());
  st.uploads.erase(it);
}

/// Stores the complete upload `path` as the bundle `sha` (its hash checked), then copies it
/// to up to two more alive members (rendezvous order on the hash); answers with the nodes
/// that hold it.
void store_bundle(checkpoints_actor* self, caf::response_promise rp, std::string sha,
                  std::string path, std::string label) {
  auto& st = self->state;
  auto store = st.store;
  auto serial = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
  offload<expected<ckpt::manifest>>(
    self,
    [store, sha, path, label, serial]() -> expected<ckpt::manifest> {
      if (auto have = local_bundle(*store, sha)) {
        ::unlink(path.c_str());
        return *have;
      }
      auto dir = path + ".d";
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      if (ec || ::rename(path.c_str(), (dir + "/" + bundle_file).c_str()) != 0) {
        ::unlink(path.c_str());
        std::filesystem::remove_all(dir, ec);
        return failure{"cannot stage the bundle: " + std::string(std::strerror(errno))};
      }
      ckpt::manifest m;
      m.job = ship_store_entry(sha);
      m.step = 0;
      m.serial = serial;
      m.label = label;
      auto done = store->commit_dir(m, dir, true);
      std::filesystem::remove_all(dir, ec);
      if (!done)
        return done;
      if (done->files.size() != 1 || done->files[0].sha256 != sha) {
        auto got = done->files.empty() ? std::string("?") : done->files[0].sha256;
        store->forget(m.job);
        return failure{"the bundle arrived corrupt: its SHA-256 is " + got + ", not " + sha};
      }
      return done;
    },
    [=](expected<ckpt::manifest>& done) mutable {
      auto& st = self->state;
      if (!done) {
        st.log->warn("bundle {} ({}) not stored: {}", sha.substr(0, 12), label, done.error());
        return rp.deliver(make_error(errc::bad_request, done.error()));
      }
      auto piece = *done;
      std::vector<std::string> targets;
      for (auto& n : rendezvous_rank(sha, st.view.others_alive()))
        if (targets.size() + 1 < ship_copies)
          targets.push_back(n);
      push_piece(self, piece, targets, [=](copies c) mutable {
        auto& log = self->state.log;
        for (auto& p : c.problems)
          log->warn("bundle {}: not copied to {}", sha.substr(0, 12), p);
        log->info("bundle {} ({}, {} bytes) stored on {} node(s)", sha.substr(0, 12), label,
                  piece.bytes(), c.nodes.size());
        ship_put_reply out;
        out.received = piece.bytes();
        out.stored = true;
        out.nodes = std::move(c.nodes);
        rp.deliver(encode(out));
      });
    });
}

caf::result<std::string> on_ship_put(checkpoints_actor* self, ship_put_request req) {
  auto& st = self->state;
  if (!is_sha256(req.sha256))
    return make_error(errc::bad_request, "ship put: '" + req.sha256 + "' is not a SHA-256");
  if (req.upload.empty() || req.upload.size() > 64
      || req.upload.find_first_not_of("0123456789abcdefghijklmnopqrstuvwxyz")
           != std::string::npos)
    return make_error(errc::bad_request, "ship put: the upload id must be 1-64 of [0-9a-z]");
  if (req.total > st.store->max_bytes())
    return make_error(errc::bad_request,
                      "ship put: a bundle of " + ship::human_bytes(req.total)
                        + " is larger than this node's largest piece ("
                        + ship::human_bytes(st.store->max_bytes()) + ", --checkpoint-max-mb)");
  if (req.offset + req.data.size() > req.total)
    return make_error(errc::bad_request, "ship put: bytes past the bundle's announced size");
  auto key = req.sha256 + "." + req.upload;
  // Uploads whose client went away: dropped after ten minutes without a chunk.
  auto now = std::chrono::steady_clock::now();
  for (auto i = st.uploads.begin(); i != st.uploads.end();) {
    auto next = std::next(i);
    if (i->first != key && now - i->second.touched > std::chrono::minutes(10))
      drop_upload(st, i->first);
    i = next;
  }
  if (req.offset == 0) {
    drop_upload(st, key);
    std::error_code ec;
    std::filesystem::create_directories(incoming_dir(st), ec);
    upload u;
    u.path = incoming_dir(st) + "/" + key;
    u.total = req.total;
    u.label = req.label.substr(0, 512);
    u.fd = ::open(u.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (u.fd < 0)
      return make_error(errc::unavailable, "ship put: cannot write " + u.path + ": "
                                             + std::strerror(errno));
    st.uploads[key] = std::move(u);
  }
  auto it = st.uploads.find(key);
  if (it == st.uploads.end())
    return make_error(errc::bad_request, "ship put: no upload of bundle "
                                           + req.sha256.substr(0, 12)
                                           + " under way here (start again at offset 0)");
  auto& u = it->second;
  if (req.offset != u.received || req.total != u.total) {
    auto want = u.received;
    drop_upload(st, key);
    return make_error(errc::bad_request, "ship put: bytes at offset " + std::to_string(req.offset)
                                           + ", expected " + std::to_string(want)
                                           + " (start again at offset 0)");
  }
  if (!ckpt::write_all(u.fd, req.data.data(), req.data.size())) {
    std::string why = std::strerror(errno);
    drop_upload(st, key);
    return make_error(errc::unavailable, "ship put: cannot write the bundle: " + why);
  }
  u.received += req.data.size();
  u.touched = now;
  if (u.received < u.total)
    return encode(ship_put_reply{u.received, false, {}});
  if (::fsync(u.fd) != 0 || ::close(u.fd) != 0) {
    u.fd = -1;
    std::string why = std::strerror(errno);
    drop_upload(st, key);
    return make_error(errc::unavailable, "ship put: cannot write the bundle: " + why);
  }
  auto path = u.path, label = u.label;
  st.uploads.erase(it);
  auto rp = self->make_response_promise<std::string>();
  store_bundle(self, rp, req.sha256, path, label);
  return rp;
}

/// Where a bundle can be fetched: its piece and (endpoint, ticket) offers.
struct bundle_sources {
  std::optional<ckpt::manifest> piece;
  std::vector<std::pair<std::string, std::string>> offers;
  std::set<std::string> nodes; ///< alive members that hold it (this one too)
};

/// Asks the alive members which of `shas` they hold.
void find_bundles(checkpoints_actor* self, std::vector<std::string> shas,
                  std::function<void(std::map<std::string, bundle_sources>)> then) {
  auto out = std::make_shared<std::map<std::string, bundle_sources>>();
  auto left = std::make_shared<size_t>(shas.size());
  if (shas.empty())
    return then({});
  for (auto& sha : shas)
    gather(self, ship_store_entry(sha), [=](std::vector<ckpt_list_reply> replies, size_t) {
      auto& src = (*out)[sha];
      for (auto& r : replies)
        for (auto& o : r.pieces)
          if (o.piece.job == ship_store_entry(sha) && o.piece.files.size() == 1
              && o.piece.files[0].sha256 == sha) {
            src.nodes.insert(r.node);
            if (!src.piece)
              src.piece = o.piece;
            if (r.node != self->state.cfg.node)
              src.offers.emplace_back(r.endpoint, o.ticket);
            break;
          }
      if (--*left == 0)
        then(std::move(*out));
    });
}

caf::result<std::string> on_ship_have(checkpoints_actor* self, ship_have_request req) {
  if (req.sha256.size() > 64)
    return make_error(errc::bad_request, "ship have: more than 64 bundles");
  for (auto& sha : req.sha256)
    if (!is_sha256(sha))
      return make_error(errc::bad_request, "ship have: '" + sha + "' is not a SHA-256");
  auto rp = self->make_response_promise<std::string>();
  find_bundles(self, req.sha256, [=](std::map<std::string, bundle_sources> found) mutable {
    ship_have_reply out;
    for (auto& sha : req.sha256)
      out.holders.push_back(static_cast<int32_t>(found[sha].nodes.size()));
    rp.deliver(encode(out));
  });
  return rp;
}

/// Bytes [offset, offset + max) of the stored blob `sha` (fetched from a member that holds
/// it when this node does not): `monkey reproduce ID --diff` reads a job's diff this way.
expected<ship_get_reply> read_blob(ckpt::store& store, const ckpt::tls_ptr& tls,
                                   const ship_get_request& req, const bundle_sources& src) {
  auto piece = local_bundle(store, req.sha256);
  std::string why = "no alive member holds it";
  if (!piece && src.piece)
    for (auto& [endpoint, ticket] : src.offers) {
      auto got = ckpt::pull(store, endpoint, ticket, *src.piece, tls);
      if (got) {
        piece = *got;
        break;
      }
      why = got.error();
    }
  if (!piece)
    return failure{"blob " + req.sha256.substr(0, 12) + " could not be fetched: " + why};
  auto path = store.dir_of(*piece) + "/" + bundle_file;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return failure{"cannot read " + path + ": " + std::strerror(errno)};
  ship_get_reply out;
  out.total = piece->bytes();
  if (req.offset < out.total) {
    out.data.resize(static_cast<size_t>(std::min<uint64_t>(req.max, out.total - req.offset)));
    size_t got = 0;
    while (got < out.data.size()) {
      auto n = ::pread(fd, out.data.data() + got, out.data.size() - got,
                       static_cast<off_t>(req.offset + got));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      got += static_cast<size_t>(n);
    }
    out.data.resize(got);
  }
  ::close(fd);
  return out;
}

caf::result<std::string> on_ship_get(checkpoints_actor* self, ship_get_request req) {
  if (!is_sha256(req.sha256))
    return make_error(errc::bad_request, "ship get: '" + req.sha256 + "' is not a SHA-256");
  req.max = std::min<uint64_t>(req.max, 1 << 20);
  auto rp = self->make_response_promise<std::string>();
  auto& st = self->state;
  std::vector<std::string> wanted;
  if (!local_bundle(*st.store, req.sha256))
    wanted.push_back(req.sha256);
  find_bundles(self, wanted, [=](std::map<std::string, bundle_sources> found) mutable {
    auto& st = self->state;
    offload<expected<ship_get_reply>>(
      self,
      [store = st.store, tls = st.tls, req, src = found[req.sha256]] {
        return read_blob(*store, tls, req, src);
      },
      [=](expected<ship_get_reply>& done) mutable {
        if (done)
          rp.deliver(encode(*done));
        else
          rp.deliver(make_error(errc::not_found, "ship get: " + done.error()));
      });
  });
  return rp;
}

/// Fetches the bundles this node lacks, then unpacks every one under the destination.
expected<ship_unpacked> unpack_all(ckpt::store& store, const ckpt::tls_ptr& tls,
                                   const ship_unpack_args& args,
                                   const std::map<std::string, bundle_sources>& found) {
  ship_unpacked out;
  for (auto& b : args.bundles) {
    auto piece = local_bundle(store, b.sha256);
    if (!piece) {
      auto it = found.find(b.sha256);
      std::string why = "no alive member holds it";
      if (it != found.end() && it->second.piece)
        for (auto& [endpoint, ticket] : it->second.offers) {
          auto got = ckpt::pull(store, endpoint, ticket, *it->second.piece, tls);
          if (got) {
            piece = *got;
            ++out.fetched;
            break;
          }
          why = got.error();
        }
      if (!piece)
        return failure{"the " + b.kind + " bundle " + b.sha256.substr(0, 12) + " (" + b.source
                       + ") could not be fetched: " + why};
    }
    auto files = ship::unpack(store.dir_of(*piece) + "/" + bundle_file, args.dest + "/" + b.into);
    if (!files)
      return failure{files.error()};
    out.files += static_cast<int64_t>(*files);
    out.bytes += piece->bytes();
  }
  return out;
}

void on_ship_unpack(checkpoints_actor* self, caf::response_promise rp, ship_unpack_args args) {
  auto& st = self->state;
  std::vector<std::string> missing;
  for (auto& b : args.bundles)
    if (!local_bundle(*st.store, b.sha256))
      missing.push_back(b.sha256);
  find_bundles(self, missing, [=](std::map<std::string, bundle_sources> found) mutable {
    auto& st = self->state;
    offload<expected<ship_unpacked>>(
      self,
      [store = st.store, tls = st.tls, args, found] {
        return unpack_all(*store, tls, args, found);
      },
      [=](expected<ship_unpacked>& done) mutable {
        if (!done) {
          self->state.log->warn("cannot unpack shipped files into {}: {}", args.dest, done.error());
          return rp.deliver(make_error(errc::unavailable, done.error()));
        }
        rp.deliver(*done);
      });
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
    case verb::ship_have: {
      auto req = decode<ship_have_request>(env.body, "ship have");
      if (!req)
        return make_error(errc::bad_request, req.error());
      return on_ship_have(self, std::move(*req));
    }
    case verb::ship_put: {
      auto req = decode<ship_put_request>(env.body, "ship put");
      if (!req)
        return make_error(errc::bad_request, req.error());
      return on_ship_put(self, std::move(*req));
    }
    case verb::ship_get: {
      auto req = decode<ship_get_request>(env.body, "ship get");
      if (!req)
        return make_error(errc::bad_request, req.error());
      return on_ship_get(self, std::move(*req));
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
  register_as(self->system(), checkpoints_name, caf::actor_cast<caf::strong_actor_ptr>(self));
  self->set_down_handler([=](const caf::down_msg& dm) {
    auto& st = self->state;
    if (st.membership && st.membership.address() == dm.source) {
      st.membership = nullptr;
      self->delayed_send(self, std::chrono::milliseconds(100), atoms::subscribe::value);
    }
  });
  {
    // Uploads cut off by a restart are not resumed: the client starts again.
    std::error_code ec;
    std::filesystem::remove_all(incoming_dir(st), ec);
  }
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
    [=](atoms::store_idle, int64_t age_ms) {
      return self->state.store->idle_jobs(std::chrono::milliseconds(age_ms));
    },
    [=](atoms::store_drop, const std::vector<std::string>& entries) {
      auto& st = self->state;
      size_t jobs = 0, bundles = 0;
      for (auto& e : entries) {
        st.store->forget(e);
        ++(e.rfind(ship_store_entry(""), 0) == 0 ? bundles : jobs);
      }
      if (!entries.empty())
        st.log->info("collection: removed the checkpoints of {} job(s) and {} shipped "
                     "bundle(s) that no job in the cluster refers to any more",
                     jobs, bundles);
    },
    [=](atoms::ship_unpack, ship_unpack_args& args) {
      auto rp = self->make_response_promise<ship_unpacked>();
      on_ship_unpack(self, rp, std::move(args));
      return rp;
    },
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
