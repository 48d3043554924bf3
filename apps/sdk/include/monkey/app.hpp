// SPDX-License-Identifier: Apache-2.0
#pragma once
// The Monkey app SDK: the one header an app includes (docs/writing-apps.md).
//
// An app is an executable (`monkey_add_app(NAME hello SOURCES hello.cpp)` builds
// `monkey-app-hello`) that describes itself and runs as the app host of a job:
//
//   caf::behavior my_rank(caf::event_based_actor* self, monkey::app::context ctx) {
//     ctx.report(0, {{"ready", 1}});
//     return { [=](const monkey::app_message& m) { ... } };
//   }
//   monkey::app::definition define() {
//     monkey::app::definition app{"hello", "what it does"};
//     app.int_param("steps", 10, 1, 1000, "how many steps");
//     app.entry("my_rank", my_rank);
//     return app;
//   }
//   MONKEY_APP(define)
//
// `monkey-app-hello --describe` prints the app's parameters; the node runs it as one app
// host per node taking part in a job, which connects back to its node (loopback, the
// attempt's own key) and spawns the entry actor once per rank it hosts. App code never runs
// inside monkey-runtime: a crash here ends this process only.
//
// What a rank gets (context): its rank and the world size, the job's parameters and seed,
// the other ranks' entry actors (peer), typed app messages (send / as), metrics (report),
// its own log (log), the policy that restarts it when it fails, and (for an app that asks
// for it with definition::data_plane) tensors between ranks: ctx.tensors(self) gives
// point-to-point send/recv and the collectives, each completing as a tensor_done message to
// the actor (docs/dataplane.md).

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include <caf/all.hpp>
#include <msgpack.hpp>

#include "monkey/sdk/message.hpp"
#include "monkey/sdk/tensor.hpp"

namespace monkey::app {

class context;

/// A rank's actor: a function-based CAF actor that gets its context.
using actor_fn = std::function<caf::behavior(caf::event_based_actor*, context)>;

/// What the host does when a rank's actor fails (exits with an error).
enum class failure_policy {
  gang, ///< stop every rank and start them all again (data-parallel apps): the default
  rank, ///< start that rank again; the others go on
};

/// An app: its name, parameters, actor types and entry actor.
class definition {
public:
  explicit definition(std::string name, std::string description = "");

  /// Parameters, as `--set NAME=VALUE` gives them; checked at submit against these.
  definition& int_param(std::string name, int64_t def, int64_t min, int64_t max,
                        std::string help = "");
  definition& float_param(std::string name, double def, double min, double max,
                          std::string help = "");
  definition& bool_param(std::string name, bool def, std::string help = "");
  definition& string_param(std::string name, std::string def, std::string help = "");
  definition& choice_param(std::string name, std::string def, std::vector<std::string> values,
                           std::string help = "");
  /// The last parameter declared (a string) must match `regex` whole (ECMAScript); `what`
  /// says what is expected in the refusal ("widths separated by commas, e.g. 512,256").
  definition& pattern(std::string regex, std::string what);
  /// The last parameter declared may be set only when `other` has one of `values` (given
  /// or by default): e.g. a staleness bound only with strategy=ps-async.
  definition& only_with(std::string other, std::vector<std::string> values);
  /// The last parameter declared (an int) is a number of ranks the app needs beyond the
  /// job's workers (e.g. dedicated parameter servers), when `when` (if named) has one of
  /// `values`: the job's gang gets them, placed and counted like workers, and
  /// context::world_size() includes them (the workers are ranks 0..workers-1).
  definition& adds_ranks(std::string when = "", std::vector<std::string> values = {});

  /// Every rank's actor runs on a thread of its own instead of CAF's shared scheduler:
  /// for ranks that compute for long stretches in their handlers (a training step), so that
  /// they do not hold up each other or the host's own actors.
  definition& own_threads(bool on = true) {
    own_threads_ = on;
    return *this;
  }
  bool uses_own_threads() const { return own_threads_; }

  /// The actor every rank runs (the app's entry point); spawned once per rank.
  definition& entry(std::string actor_name, actor_fn fn);
  /// Another actor type of the app (listed by --describe; spawned with context::spawn).
  definition& actor(std::string actor_name, actor_fn fn);

  /// The app moves tensors between its ranks (context::tensors): each app host joins the
  /// job's data plane at gang start (shared memory between processes of one machine, TCP
  /// between machines, memory between ranks of one host).
  definition& data_plane(bool on = true) {
    data_plane_ = on;
    return *this;
  }
  bool uses_data_plane() const { return data_plane_; }

  /// What happens when a rank's actor fails, and how often (at most `max_restarts` within
  /// `window`; beyond that the attempt fails and the job's --retries take over).
  definition& on_failure(failure_policy p, int max_restarts = 3,
                         std::chrono::seconds window = std::chrono::seconds(60));

  struct param_decl {
    std::string name, type, def, help;
    std::optional<double> min, max;
    std::vector<std::string> values;
    std::string pattern, pattern_help, only_with;
    std::vector<std::string> only_with_values;
    bool adds_ranks = false;
    std::string ranks_when;
    std::vector<std::string> ranks_when_values;
  };
  struct actor_decl {
    std::string name;
    actor_fn fn;
  };
  const std::string& name() const { return name_; }
  const std::string& description() const { return description_; }
  const std::vector<param_decl>& params() const { return params_; }
  const std::vector<actor_decl>& actors() const { return actors_; } ///< the entry first
  failure_policy policy() const { return policy_; }
  int max_restarts() const { return max_restarts_; }
  std::chrono::seconds restart_window() const { return window_; }

private:
  definition& add(param_decl p);
  std::string name_, description_;
  std::vector<param_decl> params_;
  std::vector<actor_decl> actors_;
  failure_policy policy_ = failure_policy::gang;
  bool data_plane_ = false;
  bool own_threads_ = false;
  int max_restarts_ = 3;
  std::chrono::seconds window_{60};
};

/// The name an app message type travels under: T::monkey_type when the type declares one
/// (`static constexpr const char* monkey_type = "pi.sum";`), else the compiler's name of
/// the type (every rank of a job runs the same build, so the names agree).
template <class T, class = void>
struct message_name {
  static const char* get() { return typeid(T).name(); }
};
template <class T>
struct message_name<T, std::void_t<decltype(T::monkey_type)>> {
  static const char* get() { return T::monkey_type; }
};
template <class T>
const char* type_name() {
  return message_name<T>::get();
}

/// Packs an app message (any type with MSGPACK_DEFINE / MSGPACK_DEFINE_MAP).
template <class T>
app_message pack(int32_t from, const T& value) {
  msgpack::sbuffer buf;
  msgpack::pack(buf, value);
  return app_message{from, type_name<T>(), std::string(buf.data(), buf.size())};
}

/// The message as a T, or nothing when it is another type (or does not decode).
template <class T>
std::optional<T> as(const app_message& m) {
  if (m.type != type_name<T>())
    return std::nullopt;
  try {
    auto oh = msgpack::unpack(m.body.data(), m.body.size());
    return oh.get().as<T>();
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

struct host_state; // the app host's shared state (host.cpp)

/// A tensor: element type, count and shared, aligned memory (monkey/sdk/tensor.hpp).
using tensor = dp::buffer;
using dp::dtype;

/// How a collective combines the ranks' tensors: sum (float32, float64, bfloat16, float16,
/// int32, int64) or mean (the floating types).
enum class reduce { sum, mean };

/// The end of a data plane operation, sent to the actor that started it.
struct tensor_done {
  uint64_t op = 0;   ///< what the call that started it returned
  std::string error; ///< empty: it worked
  tensor data;       ///< a receive's tensor (the one given, or a new one of the frame's size)
  bool ok() const { return error.empty(); }
};

/// A rank's tensors to and from the other ranks, for one actor (context::tensors). Every
/// call returns at once with an operation id; a tensor_done with that id reaches the actor
/// when the operation ended. A tensor in flight must not be touched until then.
///
/// Collectives take a group (the ranks taking part, in ring order; empty: every rank): every
/// rank of the group calls the same collectives in the same order. Sums follow the ring's
/// order (deterministic for a given world size and group); bfloat16 and float16 add in
/// float32 and round back at each step, integers wrap.
class tensors {
public:
  /// Sends `t` to rank `to` under `tag` (below 2^31), matched by its recv(rank, tag).
  uint64_t send(int32_t to, uint32_t tag, tensor t) const;
  /// Receives the next tensor `from` sends under `tag`: into `into` (its type and size must
  /// match), or into a new tensor of the sent size when `into` is empty.
  uint64_t recv(int32_t from, uint32_t tag, tensor into = {}) const;
  /// Every rank of the group ends with the sum (or mean) of the group's `t`, in place.
  uint64_t allreduce(tensor t, reduce op = reduce::sum, std::vector<int32_t> group = {}) const;
  /// Every rank of the group ends with `root`'s `t`, in place.
  uint64_t broadcast(tensor t, int32_t root, std::vector<int32_t> group = {}) const;
  /// `out` gets this rank's chunk of the reduction of every `in` (chunk sizes: the count
  /// split evenly, the first count % n chunks one longer); `in` is used as scratch.
  uint64_t reduce_scatter(tensor in, tensor out, reduce op = reduce::sum,
                          std::vector<int32_t> group = {}) const;
  /// `out` (every rank's chunk, in group order) gets each rank's `in`.
  uint64_t allgather(tensor in, tensor out, std::vector<int32_t> group = {}) const;
  /// How this rank reaches `peer`: "shm", "tcp", "local", or "" (itself, or no data plane).
  std::string transport(int32_t peer) const;
  /// `count` zeroed elements of `t` for collectives: in the host's shared arena when its data
  /// plane has one with room, else on the heap (a plain tensor). An all-reduce whose ranks,
  /// all on one machine, all pass such tensors reads the others' tensors in place instead of
  /// copying through the rings (docs/dataplane.md, "Registered buffers").
  tensor alloc(dtype t, uint64_t count) const;
  /// Whether `t` lies in the host's shared arena (alloc found room).
  bool registered(const tensor& t) const;

  /// NCCL between GPUs (docs/dataplane.md, "NCCL"). Every rank of `group` joins one NCCL
  /// communicator on its CUDA device `device` (0: the GPU the node gave the worker). A
  /// collective: every rank of the group calls it, in the same order as its other
  /// collectives. Its tensor_done is ok once all joined; otherwise every rank gets the same
  /// refusal (a rank without a GPU or without NCCL in its build names how many could not
  /// and why) and may go on with host tensors and the collectives above.
  uint64_t gpu_join(int device = 0, std::vector<int32_t> group = {}) const;
  /// Every rank of a joined group ends with the sum (or mean) of the group's `count`
  /// elements of `t` at `device_data` (CUDA memory on the joined device), in place, by
  /// NCCL, on the group's own CUDA stream: the data must be ready (synchronize the stream
  /// that wrote it first); the tensor_done comes once NCCL finished. GPU all-reduces of a
  /// group run in the order called, beside (not ordered with) the host collectives. A rank that dies or freezes fails the others (as the host
  /// collectives do), and the group's later calls fail too: join a new group after a gang
  /// restart. The tensor_done carries no data.
  uint64_t gpu_allreduce(void* device_data, dtype t, uint64_t count, reduce op = reduce::sum,
                         std::vector<int32_t> group = {}) const;

private:
  friend class context;
  tensors(std::shared_ptr<host_state> host, int32_t rank, caf::actor target)
    : host_(std::move(host)), rank_(rank), target_(std::move(target)) {}
  std::shared_ptr<host_state> host_;
  int32_t rank_;
  caf::actor target_;
};

/// A rank's checkpoint: the step it was saved at and the bytes the rank saved.
struct checkpoint {
  int64_t step = -1;
  std::string data;
};

/// What a rank's actor knows and can do. Cheap to copy; valid while the host runs.
class context {
public:
  context(std::shared_ptr<host_state> host, int32_t rank);

  int32_t rank() const { return rank_; }
  int32_t world_size() const;
  const std::string& job_id() const;
  int32_t attempt() const;    ///< 1 for the first run of the job, 2 for its first retry, ...
  uint64_t seed() const;      ///< the job's seed (the same for every attempt and rank)
  int32_t restarts() const;   ///< how often this rank was started again in this attempt
  /// The measured GEMM speed (GFLOP/s) of what this worker computes on: its GPU, or its
  /// share of the node's CPU (the node's device measurement); 0 when the node has none.
  double device_gflops() const;

  /// The job's parameters, defaults filled in (the schema checked them at submit).
  const std::map<std::string, std::string>& params() const;
  std::string param(const std::string& name) const;
  int64_t param_int(const std::string& name) const;
  double param_float(const std::string& name) const;
  bool param_bool(const std::string& name) const;

  /// The entry actor of rank `r` (nullptr for a rank out of range).
  caf::actor peer(int32_t r) const;
  /// Sends `value` to rank `r`'s entry actor as an app message from this rank.
  template <class T>
  void send(int32_t r, const T& value) const {
    caf::anon_send(peer(r), pack(rank_, value));
  }
  /// Sends `value` to every other rank.
  template <class T>
  void broadcast(const T& value) const {
    auto msg = pack(rank_, value);
    for (int32_t r = 0; r < world_size(); ++r)
      if (r != rank_)
        caf::anon_send(peer(r), msg);
  }

  /// Metric points at `step` (stored with the job like a command job's MONKEY_METRIC
  /// lines, with this rank): `ctx.report(10, {{"loss", 0.3}})`.
  void report(int64_t step, const std::map<std::string, double>& values) const;

  /// A line in this rank's log (`monkey logs JOB --rank R`).
  void log(const std::string& line) const;

  /// Saves this rank's state at `step` (docs/checkpoints.md). The bytes are written to the
  /// node's disk now; once every rank this host runs has saved `step`, the host hands them
  /// to its node, which stores them and copies them to the job's holders (over a plain
  /// socket) before the step counts. A new attempt (after a crash, a lost node, a retry)
  /// and a rank restarted by the policy get the newest step that counts for every rank.
  /// False (and the reason in this rank's log) when the bytes could not be written.
  bool save_checkpoint(int64_t step, const std::string& bytes) const;
  /// The newest checkpoint of rank `r` (default: this rank) that counts: saved in this
  /// attempt and stored by the holders, or restored at the attempt's start; nullopt: none
  /// (the job starts from scratch).
  std::optional<checkpoint> latest_checkpoint() const { return latest_checkpoint(rank_); }
  std::optional<checkpoint> latest_checkpoint(int32_t r) const;

  /// This rank's tensors, their completions (tensor_done) going to `self`. Needs an app
  /// defined with data_plane(); otherwise every operation ends with an error saying so.
  monkey::app::tensors tensors(caf::event_based_actor* self) const {
    return monkey::app::tensors{host_, rank_, caf::actor_cast<caf::actor>(self)};
  }

  /// Spawns another actor type of the app (definition::actor) with this rank's context (on
  /// a thread of its own when the app asks for own_threads()).
  caf::actor spawn(const std::string& actor_name) const;

private:
  std::shared_ptr<host_state> host_;
  int32_t rank_ = 0;
};

/// Runs the app: `--describe` prints its description (JSON), `--help` its usage; started
/// by a node (MONKEY_* environment) it hosts the job's ranks. The exit code is the host's.
int run(const definition& app, int argc, char** argv);

} // namespace monkey::app

// tensor_done only travels inside an app host (from the data plane's threads to an actor):
// never serialized, never registered (it cannot change CAF's application identifier).
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(monkey::app::tensor_done)

/// The app's `main`: `MONKEY_APP(define)` where `define()` returns the definition.
#define MONKEY_APP(define_fn)                                                                 \
  int main(int argc, char** argv) {                                                            \
    return ::monkey::app::run(define_fn(), argc, argv);                                        \
  }
