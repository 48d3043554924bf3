// SPDX-License-Identifier: Apache-2.0
#include "actors/sweep/sweep_actor.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <caf/all.hpp>

#include "actors/gateway/gateway.hpp"
#include "actors/messages.hpp"
#include "runtime/errc.hpp"
#include "runtime/logging.hpp"
#include "runtime/sweep/drive.hpp"
#include "runtime/wire/atoms.hpp"
#include "runtime/wire/envelope.hpp"

namespace monkey {

namespace {

/// How long one verb may take: a submit may try three owners (8 s each) and replicates, a
/// listing fans out to every member; as long as a client's session allows.
constexpr std::chrono::seconds verb_timeout{30};
/// How long the node's root supervisor may take to name its router.
constexpr std::chrono::seconds lookup_timeout{5};

/// A file the actor appends lines to (the attempt's stdout or stderr).
class line_file {
public:
  explicit line_file(const std::string& path) {
    if (!path.empty())
      fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  }
  ~line_file() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  line_file(const line_file&) = delete;
  line_file& operator=(const line_file&) = delete;
  void write(const std::string& line) {
    if (fd_ < 0)
      return;
    auto text = line + "\n"; // one write: a reader never sees half a line
    (void) !::write(fd_, text.data(), text.size());
  }

private:
  int fd_ = -1;
};

struct sweep_actor_state {
  launch_request req;
  caf::actor worker;
  abandon_flag abandoned;
  caf::actor router; ///< the node's router (found through the root supervisor)
  std::unique_ptr<line_file> out, err;
  std::unique_ptr<sweep::driver> drive;
  bool reported = false;
  std::shared_ptr<spdlog::logger> log;
  static inline const char* name = "sweep_optimizer";
};

using sweep_actor = caf::stateful_actor<sweep_actor_state>;

/// The node's router, asked of the root supervisor while none is known (or the last died).
expected<caf::actor> router_of(sweep_actor* self) {
  auto& st = self->state;
  if (st.router)
    return st.router;
  auto root = caf::actor_cast<caf::actor>(
    self->system().registry().get(caf::atom_from_string(root_supervisor_name)));
  if (!root)
    return failure{"the node's supervision tree is not running"};
  caf::scoped_actor sa{self->system()};
  expected<caf::actor> out = failure{"the node's router did not answer"};
  sa->request(root, lookup_timeout, atoms::which::value, std::string(router_path))
    .receive([&](const caf::actor& r) { out = r; },
             [&](caf::error& err) { out = failure{"the node's router: " + describe(err)}; });
  if (out)
    st.router = *out;
  return out;
}

/// One client verb, asked of the node's router as a client's session would.
expected<std::string> call(sweep_actor* self, verb v, const std::string& body) {
  if (*self->state.abandoned)
    return failure{"the attempt is over"};
  auto router = router_of(self);
  if (!router)
    return failure{router.error()};
  caf::scoped_actor sa{self->system()};
  expected<std::string> out = failure{"no answer"};
  sa->request(*router, verb_timeout, envelope{static_cast<uint16_t>(v), body})
    .receive([&](std::string& reply) { out = std::move(reply); },
             [&](caf::error& err) {
               out = failure{describe(err)};
               // A router that went away is asked for again (a restart).
               if (err == caf::sec::request_receiver_down)
                 self->state.router = nullptr;
             });
  return out;
}

void report(sweep_actor* self, int code) {
  auto& st = self->state;
  if (st.reported)
    return;
  st.reported = true;
  exit_info ex;
  ex.exit_code = code;
  self->send(st.worker, atoms::exited::value, ex);
  self->quit();
}

caf::behavior sweep_actor_impl(sweep_actor* self, launch_request req, caf::actor worker,
                               abandon_flag abandoned) {
  auto& st = self->state;
  st.req = std::move(req);
  st.worker = std::move(worker);
  st.abandoned = std::move(abandoned);
  st.log = logger("sweep");
  st.out = std::make_unique<line_file>(st.req.stdout_path);
  st.err = std::make_unique<line_file>(st.req.stderr_path);
  self->monitor(st.worker);
  self->set_down_handler([=](const caf::down_msg& dm) {
    if (dm.source == self->state.worker.address()) // its attempt is over
      self->quit();
  });
  std::map<std::string, std::string> env;
  for (auto& kv : st.req.env) {
    auto eq = kv.find('=');
    if (eq != std::string::npos)
      env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  sweep::driver::sinks sinks;
  auto* out = st.out.get();
  auto* err = st.err.get();
  sinks.out = [out](const std::string& line) { out->write(line); };
  sinks.log = [err](const std::string& line) { err->write(line); };
  auto d = sweep::driver::from_env(
    env, st.req.workdir,
    [self](verb v, const std::string& body) { return call(self, v, body); }, sinks);
  if (!d) {
    st.err->write("sweep: " + d.error());
    st.log->warn("{}: the sweep's optimizer does not start: {}",
                 env.count("MONKEY_JOB_ID") ? env["MONKEY_JOB_ID"] : std::string("?"), d.error());
    report(self, 64); // the attempt fails: its sweep cannot run anywhere
    return {};
  }
  st.drive = std::move(*d);
  self->send(self, atoms::tick::value);
  return {
    [=](atoms::tick) {
      auto& st = self->state;
      if (st.reported || *st.abandoned)
        return; // its stop, kill or worker's down is on its way
      auto next = st.drive->tick(now_ms());
      if (next.done)
        return report(self, next.code);
      self->delayed_send(self, std::chrono::milliseconds(next.pause_ms), atoms::tick::value);
    },
    [=](atoms::stop, const std::string& why) {
      // Requeued (its node shuts down): the trials go on, and the job's next attempt, on
      // another node, follows them from the checkpoint. Otherwise (cancelled: `sweep stop`;
      // a timeout) the next tick stops the trials, at most a second away, and then ends.
      if (why == "requeued")
        return report(self, 143);
      self->state.drive->stop();
    },
  };
}

} // namespace

caf::actor spawn_sweep_actor(caf::actor_system& sys, launch_request req, caf::actor worker,
                             abandon_flag abandoned) {
  return sys.spawn<caf::detached>(sweep_actor_impl, std::move(req), std::move(worker),
                                  std::move(abandoned));
}

} // namespace monkey
