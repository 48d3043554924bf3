// SPDX-License-Identifier: Apache-2.0
#include "actors/device_proxy.hpp"

#include <deque>

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "runtime/wire/atoms.hpp"
#include "runtime/errc.hpp"
#include "runtime/logging.hpp"
#include "runtime/wire/messages/client.hpp"
#include "runtime/supervision/supervisor.hpp"

namespace monkey {

namespace {

// ---- task worker ----------------------------------------------------------------------

caf::behavior task_worker_impl(caf::event_based_actor* self) {
  return {
    [=](atoms::run_tasks, const task_chunk& c) {
      chunk_result r;
      r.seq = c.seq;
      r.batch = c.batch;
      r.first = c.first;
      r.count = c.count;
      if (c.fn == nullptr) {
        for (uint64_t i = c.first; i < c.first + c.count; ++i)
          r.failures.emplace_back(i, "unknown task kind");
      } else {
        for (uint64_t i = c.first; i < c.first + c.count; ++i)
          if (auto cause = c.fn(c.arg, i); !cause.empty())
            r.failures.emplace_back(i, std::move(cause));
      }
      return caf::make_message(atoms::task_done::value, std::move(r));
    },
  };
}

// ---- proxy ----------------------------------------------------------------------------

struct slot {
  caf::actor worker;
  std::optional<task_chunk> busy;
  uint32_t restarts = 0;
};

struct proxy_state {
  devices::device_info info;
  std::vector<slot> slots;
  std::deque<task_chunk> waiting;
  caf::actor coordinator; ///< where results go: the sender of the chunks
  uint64_t tasks_run = 0;
  std::shared_ptr<spdlog::logger> log;
  static inline const char* name = "device_proxy";
};

using proxy_actor = caf::stateful_actor<proxy_state>;

caf::actor start_worker(proxy_actor* self) {
  auto w = self->spawn<caf::detached + caf::linked>(task_worker_impl);
  return w;
}

void dispatch(proxy_actor* self) {
  auto& st = self->state;
  for (auto& s : st.slots) {
    if (st.waiting.empty())
      return;
    if (s.busy || !s.worker)
      continue;
    s.busy = std::move(st.waiting.front());
    st.waiting.pop_front();
    self->send(s.worker, atoms::run_tasks::value, *s.busy);
  }
}

caf::behavior proxy_impl(proxy_actor* self, devices::device_info info) {
  auto& st = self->state;
  st.info = std::move(info);
  st.log = logger("devices");
  auto n = std::max<int32_t>(1, st.info.slots);
  st.slots.resize(static_cast<size_t>(n));
  for (auto& s : st.slots)
    s.worker = start_worker(self);
  self->set_exit_handler([=](const caf::exit_msg& em) {
    auto& st = self->state;
    for (auto& s : st.slots) {
      if (!s.worker || s.worker.address() != em.source)
        continue;
      st.log->warn("{}: a task worker died ({}); replacing it and running its chunk again",
                   st.info.name, caf::to_string(em.reason));
      if (s.busy)
        st.waiting.push_front(std::move(*s.busy));
      s.busy.reset();
      s.restarts += 1;
      s.worker = start_worker(self);
      dispatch(self);
      return;
    }
    // Not one of ours: our supervisor stops us (the workers are linked and follow).
    self->quit(em.reason);
  });
  return {
    [=](atoms::run_tasks, task_chunk& c) {
      auto& st = self->state;
      st.coordinator = caf::actor_cast<caf::actor>(self->current_sender());
      st.waiting.push_back(std::move(c));
      dispatch(self);
    },
    [=](atoms::task_done, chunk_result& r) {
      auto& st = self->state;
      auto src = self->current_sender();
      for (auto& s : st.slots)
        if (s.worker && s.worker.address() == src) {
          s.busy.reset();
          break;
        }
      st.tasks_run += r.count;
      if (st.coordinator)
        self->send(st.coordinator, atoms::task_done::value, std::move(r));
      dispatch(self);
    },
    [=](atoms::info) {
      auto& st = self->state;
      device_row row;
      row.name = st.info.name;
      row.kind = st.info.kind;
      row.model = st.info.model;
      row.slots = static_cast<int32_t>(st.slots.size());
      for (auto& s : st.slots)
        row.free_slots += s.busy ? 0 : 1;
      row.memory_mb = st.info.memory_mb;
      row.gflops = st.info.gflops;
      return encode(row);
    },
    [=](atoms::tree) {
      auto& st = self->state;
      tree_node me;
      me.name = st.info.name;
      me.kind = "device_proxy";
      me.id = self->id();
      me.state = "running";
      for (size_t i = 0; i < st.slots.size(); ++i) {
        tree_node w;
        w.name = "slot" + std::to_string(i);
        w.kind = "task_worker";
        w.id = st.slots[i].worker ? st.slots[i].worker.id() : 0;
        w.restarts = st.slots[i].restarts;
        w.state = st.slots[i].busy ? "busy" : "idle";
        me.children.push_back(std::move(w));
      }
      return encode(me);
    },
    // (kill, name, shown): shown is the path as the user gave it; the answer has the
    // supervisors' form (runtime/supervision/supervisor.cpp).
    [=](atoms::kill, const std::string& name,
        const std::string& shown) -> caf::result<std::string> {
      auto& st = self->state;
      for (size_t i = 0; i < st.slots.size(); ++i) {
        if ("slot" + std::to_string(i) != name || !st.slots[i].worker)
          continue;
        // Anonymously, for the reason the coordinator kills its workers so.
        auto id = st.slots[i].worker.id();
        caf::anon_send_exit(st.slots[i].worker, caf::exit_reason::user_shutdown);
        return "killed " + shown + " (#" + std::to_string(id) + "); its supervisor " + st.info.name
               + " (the device proxy) replaces it";
      }
      return make_error(errc::not_found, "no task worker '" + name + "' on " + st.info.name);
    },
    [=](atoms::kill, const std::string& name) -> caf::result<std::string> {
      self->delegate(caf::actor_cast<caf::actor>(self), atoms::kill::value, name,
                     self->state.info.name + "/" + name);
      return caf::delegated<std::string>{};
    },
  };
}

} // namespace

caf::actor spawn_device_proxy(caf::actor_system& sys, devices::device_info info) {
  return sys.spawn(proxy_impl, std::move(info));
}

caf::actor spawn_device_supervisor(caf::actor_system& sys,
                                   const std::vector<devices::device_info>& devs) {
  std::vector<child_spec> children;
  for (auto& d : devs)
    children.push_back({d.name,
                        [d](caf::actor_system& s, const sibling_map&) {
                          return spawn_device_proxy(s, d);
                        },
                        restart_policy::permanent, true, false});
  return spawn_supervisor(sys, "devices",
                          {restart_strategy::one_for_one, 5, std::chrono::seconds(10)},
                          std::move(children));
}

} // namespace monkey
