// SPDX-License-Identifier: Apache-2.0
#include "runtime/supervision/supervisor.hpp"

#include <cstring>
#include <deque>
#include <set>

#include <caf/all.hpp>

#include "runtime/wire/atoms.hpp"
#include "runtime/errc.hpp"
#include "runtime/logging.hpp"

namespace monkey {

const char* to_string(restart_strategy s) {
  switch (s) {
    case restart_strategy::one_for_one: return "one_for_one";
    case restart_strategy::one_for_all: return "one_for_all";
    case restart_strategy::rest_for_one: return "rest_for_one";
  }
  return "?";
}

namespace {

void render(const tree_node& n, const std::string& prefix, bool last, bool root,
            std::string& out) {
  out += prefix;
  if (!root)
    out += last ? "└── " : "├── ";
  out += n.name + "  [" + n.kind + ", #" + std::to_string(n.id) + ", " + n.state
         + (n.restarts ? ", restarts " + std::to_string(n.restarts) : std::string{}) + "]\n";
  auto child_prefix = root ? prefix : prefix + (last ? "    " : "│   ");
  for (size_t i = 0; i < n.children.size(); ++i)
    render(n.children[i], child_prefix, i + 1 == n.children.size(), false, out);
}

struct child_slot {
  child_spec spec;
  caf::actor handle;
  uint32_t restarts = 0;
  bool stopped = false; ///< temporary child that ended, or transient after a normal exit
};

struct supervisor_state {
  std::string name;
  supervisor_flags flags;
  std::vector<child_slot> children;
  std::deque<caf::actor_clock::time_point> recent; ///< restart times within the period
  std::set<caf::actor_addr> retired;               ///< stopped on purpose: downs ignored
  std::shared_ptr<spdlog::logger> log;
  bool shutting_down = false;
};

using supervisor_actor = caf::stateful_actor<supervisor_state>;

sibling_map siblings_before(supervisor_state& st, size_t index) {
  sibling_map out;
  for (size_t i = 0; i < index && i < st.children.size(); ++i)
    if (st.children[i].handle)
      out[st.children[i].spec.name] = st.children[i].handle;
  return out;
}

void start_child(supervisor_actor* self, size_t i) {
  auto& st = self->state;
  auto& slot = st.children[i];
  slot.handle = slot.spec.start(self->system(), siblings_before(st, i));
  slot.stopped = false;
  if (slot.handle)
    self->monitor(slot.handle);
}

/// Stops children [from, end) in reverse order; their downs are then ignored.
void stop_children(supervisor_actor* self, size_t from, caf::exit_reason why) {
  auto& st = self->state;
  for (size_t i = st.children.size(); i-- > from;) {
    auto& slot = st.children[i];
    if (!slot.handle)
      continue;
    st.retired.insert(slot.handle.address());
    self->demonitor(slot.handle);
    self->send_exit(slot.handle, why);
    slot.handle = nullptr;
  }
}

/// Records one restart; false when the intensity is exceeded.
bool allow_restart(supervisor_actor* self) {
  auto& st = self->state;
  auto now = self->clock().now();
  st.recent.push_back(now);
  while (!st.recent.empty() && now - st.recent.front() > st.flags.period)
    st.recent.pop_front();
  return st.recent.size() <= st.flags.intensity;
}

void give_up(supervisor_actor* self, const std::string& why) {
  auto& st = self->state;
  st.log->error("supervisor {} gives up: {}", st.name, why);
  st.shutting_down = true;
  stop_children(self, 0, caf::exit_reason::user_shutdown);
  self->quit(make_error(errc::internal, "supervisor " + st.name + " gave up: " + why));
}

void on_child_down(supervisor_actor* self, const caf::down_msg& dm) {
  auto& st = self->state;
  if (st.retired.erase(dm.source) > 0 || st.shutting_down)
    return;
  size_t i = 0;
  for (; i < st.children.size(); ++i)
    if (st.children[i].handle && st.children[i].handle.address() == dm.source)
      break;
  if (i == st.children.size())
    return;
  auto& slot = st.children[i];
  slot.handle = nullptr;
  bool normal = dm.reason == caf::exit_reason::normal || dm.reason == caf::none;
  if (slot.spec.restart == restart_policy::temporary
      || (slot.spec.restart == restart_policy::transient && normal)) {
    slot.stopped = true;
    st.log->info("{}/{} ended ({}); not restarted", st.name, slot.spec.name,
                 caf::to_string(dm.reason));
    return;
  }
  if (!allow_restart(self))
    return give_up(self, "more than " + std::to_string(st.flags.intensity) + " restarts in "
                           + std::to_string(st.flags.period.count()) + " ms (last: "
                           + slot.spec.name + " stopped with " + caf::to_string(dm.reason) + ")");
  st.log->warn("{}/{} stopped ({}); restarting ({})", st.name, slot.spec.name,
               caf::to_string(dm.reason), to_string(st.flags.strategy));
  size_t first = i;
  switch (st.flags.strategy) {
    case restart_strategy::one_for_one:
      break;
    case restart_strategy::one_for_all:
      first = 0;
      stop_children(self, 0, caf::exit_reason::user_shutdown);
      break;
    case restart_strategy::rest_for_one:
      stop_children(self, i + 1, caf::exit_reason::user_shutdown);
      break;
  }
  for (size_t k = first; k < st.children.size(); ++k) {
    auto& s = st.children[k];
    if (s.stopped || s.handle)
      continue;
    ++s.restarts;
    start_child(self, k);
  }
}

caf::behavior supervisor_impl(supervisor_actor* self, std::string name, supervisor_flags flags,
                              std::vector<child_spec> specs) {
  auto& st = self->state;
  st.name = std::move(name);
  st.flags = flags;
  st.log = logger("supervisor");
  for (auto& s : specs)
    st.children.push_back(child_slot{std::move(s), nullptr, 0, false});
  for (size_t i = 0; i < st.children.size(); ++i)
    start_child(self, i);
  self->set_down_handler([=](const caf::down_msg& dm) { on_child_down(self, dm); });
  self->set_exit_handler([=](const caf::exit_msg& em) {
    self->state.shutting_down = true;
    stop_children(self, 0, caf::exit_reason::user_shutdown);
    self->quit(em.reason);
  });
  return {
    [=](atoms::tree) -> caf::result<std::string> {
      auto& st = self->state;
      auto rp = self->make_response_promise<std::string>();
      tree_node me;
      me.name = st.name;
      me.kind = std::string("supervisor (") + to_string(st.flags.strategy) + ")";
      me.id = self->id();
      me.state = "running";
      auto pending = std::make_shared<size_t>(0);
      auto result = std::make_shared<tree_node>(me);
      std::vector<std::pair<size_t, caf::actor>> ask;
      for (auto& slot : st.children) {
        tree_node n;
        n.name = slot.spec.name;
        n.kind = "actor";
        n.id = slot.handle ? slot.handle.id() : 0;
        n.restarts = slot.restarts;
        n.state = slot.handle ? "running" : "stopped";
        if (slot.handle && slot.spec.answers_tree)
          ask.emplace_back(result->children.size(), slot.handle);
        result->children.push_back(std::move(n));
      }
      *pending = ask.size();
      if (ask.empty()) {
        rp.deliver(encode(*result));
        return rp;
      }
      for (auto& [index, handle] : ask) {
        auto idx = index;
        auto finish = [=]() mutable {
          if (--*pending == 0)
            rp.deliver(encode(*result));
        };
        self->request(handle, std::chrono::seconds(5), atoms::tree::value)
          .then(
            [=](const std::string& body) mutable {
              if (auto sub = decode<tree_node>(body, "tree")) {
                auto restarts = result->children[idx].restarts;
                auto name = result->children[idx].name;
                result->children[idx] = std::move(*sub);
                result->children[idx].restarts = restarts;
                result->children[idx].name = name;
              }
              finish();
            },
            [=](const caf::error&) mutable { finish(); });
      }
      return rp;
    },
    [=](atoms::kill, const std::string& path) -> caf::result<std::string> {
      // The path as the user gave it names the actor in the answer, at every depth.
      self->delegate(caf::actor_cast<caf::actor>(self), atoms::kill::value, path, path);
      return caf::delegated<std::string>{};
    },
    [=](atoms::kill, const std::string& path, const std::string& shown)
      -> caf::result<std::string> {
      auto& st = self->state;
      auto slash = path.find('/');
      auto head = path.substr(0, slash);
      for (auto& slot : st.children) {
        if (slot.spec.name != head || !slot.handle)
          continue;
        if (slash != std::string::npos) {
          if (!slot.spec.answers_tree)
            return make_error(errc::not_found, head + " has no children");
          self->delegate(slot.handle, atoms::kill::value, path.substr(slash + 1), shown);
          return caf::delegated<std::string>{};
        }
        // exit_reason::kill cannot be trapped: a supervisor so killed would leave its
        // children running beside their replacements. It gets a trappable exit instead
        // and stops its subtree in reverse order first.
        self->send_exit(slot.handle, slot.spec.supervisor ? caf::exit_reason::user_shutdown
                                                          : caf::exit_reason::kill);
        return "killed " + shown + " (#" + std::to_string(slot.handle.id()) + "); its supervisor "
               + st.name + " restarts it";
      }
      return make_error(errc::not_found, "no actor '" + head + "' under " + st.name);
    },
    [=](atoms::which, const std::string& path) -> caf::result<caf::actor> {
      auto slash = path.find('/');
      auto head = path.substr(0, slash);
      for (auto& slot : self->state.children) {
        if (slot.spec.name != head || !slot.handle)
          continue;
        if (slash == std::string::npos)
          return slot.handle;
        self->delegate(slot.handle, atoms::which::value, path.substr(slash + 1));
        return caf::delegated<caf::actor>{};
      }
      return make_error(errc::not_found, "no running child '" + head + "' under "
                                           + self->state.name);
    },
  };
}

} // namespace

std::string render_tree(const tree_node& root) {
  std::string out;
  render(root, "", true, true, out);
  return out;
}

caf::actor spawn_supervisor(caf::actor_system& sys, std::string name, supervisor_flags flags,
                            std::vector<child_spec> children) {
  return sys.spawn(supervisor_impl, std::move(name), flags, std::move(children));
}

void register_as(caf::actor_system& sys, const char* name, const caf::strong_actor_ptr& self) {
  // caf::string_view takes a const char* only under GCC (CAF_GCC); clang needs the length.
  auto key = caf::atom_from_string(caf::string_view{name, std::strlen(name)});
  sys.registry().erase(key);
  sys.registry().put(key, self);
}

} // namespace monkey
