// SPDX-License-Identifier: Apache-2.0
#include "actors/tasks/task_dispatch.hpp"

#include <algorithm>
#include <set>
#include <unordered_map>

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "runtime/wire/atoms.hpp"
#include "runtime/wire/envelope.hpp"
#include "runtime/errc.hpp"
#include "runtime/logging.hpp"
#include "runtime/wire/messages/client.hpp"
#include "runtime/tasks.hpp"

namespace monkey {

namespace {

/// A device proxy as the dispatcher sees it: the chunks it holds.
struct proxy_ref {
  std::string name;
  caf::actor handle;
  int32_t slots = 1;
  std::set<uint64_t> chunks;
};

struct task_waiter {
  uint64_t seq = 0;
  caf::response_promise rp;
};

struct dispatch_state {
  task_dispatch_config cfg;
  caf::actor journal;
  caf::actor devices;
  std::vector<proxy_ref> proxies;
  task_book tasks;
  std::vector<task_range> final_ranges; ///< reported, waiting for the next grouped write
  bool flush_queued = false;
  bool flush_in_flight = false;
  uint64_t waiter_seq = 0;
  std::unordered_map<job_id, std::vector<task_waiter>> waiters;
  std::unordered_map<std::string, std::vector<caf::response_promise>> key_in_flight;
  bool accepting = true;
  bool draining = false;
  std::vector<caf::response_promise> shutdown_waiters;
  std::shared_ptr<spdlog::logger> log;
  static inline const char* name = "tasks";
};

using dispatch_actor = caf::stateful_actor<dispatch_state>;

void maybe_finish_shutdown(dispatch_actor* self) {
  auto& st = self->state;
  // Chunks in flight finish and their final records are written first; with --drain the
  // queued tasks run too.
  bool idle = st.tasks.in_flight() == 0 && st.final_ranges.empty() && !st.flush_in_flight
              && (!st.draining || st.tasks.queued_tasks() == 0 || st.proxies.empty());
  if (!st.accepting && idle) {
    for (auto& rp : st.shutdown_waiters)
      rp.deliver(true);
    st.shutdown_waiters.clear();
  }
}

/// Hands chunks to the proxies while they have room (two chunks per slot).
void pump(dispatch_actor* self) {
  auto& st = self->state;
  if (!st.accepting && !st.draining)
    return;
  int64_t total_slots = 0;
  for (auto& p : st.proxies)
    total_slots += p.slots;
  if (total_slots == 0)
    return;
  for (auto& p : st.proxies) {
    auto window = static_cast<size_t>(2 * p.slots);
    while (p.chunks.size() < window && st.tasks.queued_tasks() > 0) {
      // Spread a small queue over every slot; cap a large one at the configured chunk.
      auto share = st.tasks.queued_tasks() / static_cast<uint64_t>(2 * total_slots);
      auto size = std::clamp<uint64_t>(share, 1, std::max<uint32_t>(1, st.cfg.task_chunk));
      auto c = st.tasks.next(size);
      if (!c)
        break;
      p.chunks.insert(c->seq);
      self->send(p.handle, atoms::run_tasks::value, std::move(*c));
    }
  }
}

void deliver_waiters(dispatch_actor* self, const job_id& id) {
  auto& st = self->state;
  auto it = st.waiters.find(id);
  if (it == st.waiters.end())
    return;
  auto body = encode(*st.tasks.status(id));
  for (auto& w : it->second)
    w.rp.deliver(body);
  st.waiters.erase(it);
}

/// Writes the final records gathered so far: one journal write in flight at a time, so
/// everything reported meanwhile joins the next one.
void flush(dispatch_actor* self) {
  auto& st = self->state;
  st.flush_queued = false;
  if (st.flush_in_flight || st.final_ranges.empty())
    return;
  merge_ranges(st.final_ranges);
  write_batch batch;
  batch.task_ranges = std::move(st.final_ranges);
  st.final_ranges.clear();
  auto ranges = batch.task_ranges;
  st.flush_in_flight = true;
  self->request(st.journal, caf::infinite, atoms::write::value, std::move(batch))
    .then(
      [=](bool) {
        auto& st = self->state;
        st.flush_in_flight = false;
        for (auto& id : st.tasks.durable(ranges, now_ms()))
          deliver_waiters(self, id);
        if (!st.final_ranges.empty())
          flush(self);
        maybe_finish_shutdown(self);
      },
      [=](const caf::error& err) {
        auto& st = self->state;
        st.log->error("journal write of {} task final records failed: {}; retrying",
                      ranges.size(), describe(err));
        st.flush_in_flight = false;
        st.final_ranges.insert(st.final_ranges.end(), ranges.begin(), ranges.end());
        st.flush_queued = true;
        self->delayed_send(self, std::chrono::milliseconds(200), atoms::task_flush::value);
      });
}

void on_task_done(dispatch_actor* self, const chunk_result& r) {
  auto& st = self->state;
  for (auto& p : st.proxies)
    if (p.chunks.erase(r.seq) > 0)
      break;
  auto ranges = st.tasks.report(r, now_ms());
  st.final_ranges.insert(st.final_ranges.end(), std::make_move_iterator(ranges.begin()),
                         std::make_move_iterator(ranges.end()));
  if (!st.flush_queued && !st.flush_in_flight) {
    st.flush_queued = true;
    self->send(self, atoms::task_flush::value); // behind the reports already queued
  }
  pump(self);
}

/// Asks the devices supervisor for the proxy of device `name`, and monitors it.
void discover_proxy(dispatch_actor* self, const std::string& name) {
  auto& st = self->state;
  if (!st.devices)
    return;
  auto retry = [=](const caf::error&) {
    self->delayed_send(self, std::chrono::milliseconds(200), atoms::discover::value, name);
  };
  self->request(st.devices, std::chrono::seconds(5), atoms::which::value, name)
    .then(
      [=](const caf::actor& proxy) {
        self->request(proxy, std::chrono::seconds(5), atoms::info::value)
          .then(
            [=](const std::string& body) {
              auto row = decode<device_row>(body, "device info");
              auto& st = self->state;
              for (auto& p : st.proxies)
                if (p.name == name)
                  return; // found twice
              proxy_ref ref;
              ref.name = name;
              ref.handle = proxy;
              ref.slots = row ? std::max(1, row->slots) : 1;
              self->monitor(proxy);
              st.proxies.push_back(std::move(ref));
              SPDLOG_LOGGER_DEBUG(st.log, "device proxy {} joined with {} slots", name,
                                  st.proxies.back().slots);
              pump(self);
            },
            retry);
      },
      retry);
}

template <class Answer>
void settle_key(dispatch_state& st, const std::string& key, const Answer& answer) {
  if (key.empty())
    return;
  if (auto it = st.key_in_flight.find(key); it != st.key_in_flight.end()) {
    auto waiting = std::move(it->second);
    st.key_in_flight.erase(it);
    for (auto& w : waiting)
      w.deliver(answer);
  }
}

expected<job_id> resolve_batch(const dispatch_state& st, const std::string& text) {
  id_matcher m(text, "task batch");
  for (auto& b : st.tasks.list())
    m.offer(b.id);
  if (auto id = m.match())
    return *id;
  return failure{m.problem() + " on this node"};
}

void on_submit(dispatch_actor* self, caf::response_promise rp, submit_tasks_request req) {
  auto& st = self->state;
  if (!st.accepting)
    return rp.deliver(make_error(errc::refused, "the node is shutting down and accepts no tasks"));
  if (!find_task_kind(req.kind)) {
    std::string known;
    for (auto& k : task_kinds())
      known += (known.empty() ? "" : ", ") + k;
    return rp.deliver(make_error(errc::bad_request, "kind: no task kind '" + req.kind
                                                      + "' (known: " + known + ")"));
  }
  if (req.count == 0 || req.count > max_tasks_per_batch)
    return rp.deliver(make_error(errc::bad_request,
                                 "count: must be between 1 and "
                                   + std::to_string(max_tasks_per_batch) + ", not "
                                   + std::to_string(req.count)));
  if (req.kind == "sleep" && req.arg > 3'600'000'000ull)
    return rp.deliver(make_error(errc::bad_request, "arg: a sleep task sleeps at most an hour"));
  if (!req.client_key.empty()) {
    if (auto id = st.tasks.by_key(req.client_key))
      return rp.deliver(encode(submit_tasks_reply{*id, true}));
    if (auto it = st.key_in_flight.find(req.client_key); it != st.key_in_flight.end()) {
      it->second.push_back(rp);
      return;
    }
    st.key_in_flight[req.client_key];
  }
  task_batch b;
  b.id = job_id::generate();
  b.kind = req.kind;
  b.arg = req.arg;
  b.count = req.count;
  b.priority = req.priority;
  b.owner = st.cfg.node;
  b.user = req.user;
  b.host = req.host;
  b.client_key = req.client_key;
  b.submitted_ms = now_ms();
  write_batch w;
  w.task_batches.push_back(b);
  auto key = req.client_key;
  self->request(st.journal, caf::infinite, atoms::write::value, std::move(w))
    .then(
      [=](bool) mutable {
        auto& st = self->state;
        st.tasks.add(b, {});
        auto body = encode(submit_tasks_reply{b.id, false});
        settle_key(st, key, body);
        rp.deliver(body);
        pump(self);
      },
      [=](const caf::error& err) mutable {
        auto e = make_error(errc::journal_failure,
                            "the task batch could not be made durable: " + describe(err));
        settle_key(self->state, key, e);
        rp.deliver(e);
      });
}

void on_wait(dispatch_actor* self, caf::response_promise rp, const wait_tasks_request& req) {
  auto& st = self->state;
  auto id = resolve_batch(st, req.id);
  if (!id)
    return rp.deliver(make_error(errc::not_found, id.error()));
  if (req.timeout_ms == 0 || st.tasks.complete(*id))
    return rp.deliver(encode(*st.tasks.status(*id)));
  auto seq = ++st.waiter_seq;
  st.waiters[*id].push_back({seq, rp});
  auto wait = std::chrono::milliseconds(std::min<uint32_t>(req.timeout_ms, 60000));
  self->delayed_send(self, wait, atoms::task_wait::value, *id, seq);
}

void on_wait_timeout(dispatch_actor* self, const job_id& id, uint64_t seq) {
  auto& st = self->state;
  auto it = st.waiters.find(id);
  if (it == st.waiters.end())
    return;
  auto& ws = it->second;
  for (auto w = ws.begin(); w != ws.end(); ++w) {
    if (w->seq != seq)
      continue;
    w->rp.deliver(encode(*st.tasks.status(id)));
    ws.erase(w);
    break;
  }
  if (ws.empty())
    st.waiters.erase(it);
}

void on_envelope(dispatch_actor* self, const envelope& env) {
  auto rp = self->make_response_promise();
  auto& st = self->state;
  switch (static_cast<verb>(env.verb)) {
    case verb::submit_tasks: {
      auto req = decode<submit_tasks_request>(env.body, "tasks submit");
      if (!req)
        return rp.deliver(make_error(errc::bad_request, req.error()));
      return on_submit(self, rp, std::move(*req));
    }
    case verb::list_tasks: {
      auto req = decode<list_request>(env.body, "tasks");
      if (!req)
        return rp.deliver(make_error(errc::bad_request, req.error()));
      task_list_reply r;
      r.batches = st.tasks.list();
      if (req->limit > 0 && r.batches.size() > req->limit)
        r.batches.erase(r.batches.begin(), r.batches.end() - req->limit);
      return rp.deliver(encode(r));
    }
    case verb::wait_tasks: {
      auto req = decode<wait_tasks_request>(env.body, "tasks wait");
      if (!req)
        return rp.deliver(make_error(errc::bad_request, req.error()));
      return on_wait(self, rp, *req);
    }
    default:
      return rp.deliver(make_error(errc::bad_request, "the task dispatcher does not answer verb "
                                                        + std::to_string(env.verb)));
  }
}

/// How often retention runs: a tenth of it, between a second and an hour.
std::chrono::milliseconds compact_every(int64_t retention_ms) {
  return std::chrono::milliseconds(std::clamp<int64_t>(retention_ms / 10, 1000, 3600 * 1000));
}

caf::behavior task_dispatch_impl(dispatch_actor* self, task_dispatch_config cfg,
                                 caf::actor journal, caf::actor devices) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.journal = std::move(journal);
  st.devices = std::move(devices);
  st.log = logger("tasks");
  self->delayed_send(self, compact_every(st.cfg.retention_ms), atoms::compact::value);
  self->request(st.journal, caf::infinite, atoms::load_tasks::value)
    .await(
      [=](task_state_list& batches) {
        auto& st = self->state;
        size_t open = 0;
        for (auto& b : batches) {
          st.tasks.add(b.batch, b.done);
          open += st.tasks.complete(b.batch.id) ? 0 : 1;
        }
        if (open > 0)
          st.log->info("recovered {} task batches, {} with tasks still to run ({} tasks)",
                       batches.size(), open, st.tasks.queued_tasks());
        for (auto& d : st.cfg.devices)
          discover_proxy(self, d);
      },
      [=](const caf::error& err) {
        self->state.log->critical("cannot recover the task batches: {}", describe(err));
        self->quit(err);
      });
  self->set_down_handler([=](const caf::down_msg& dm) {
    auto& st = self->state;
    for (auto it = st.proxies.begin(); it != st.proxies.end(); ++it) {
      if (it->handle.address() != dm.source)
        continue;
      auto name = it->name;
      for (auto seq : it->chunks)
        st.tasks.requeue(seq);
      st.log->warn("device proxy {} went down ({}); {} chunks go back to the queue", name,
                   caf::to_string(dm.reason), it->chunks.size());
      st.proxies.erase(it);
      self->delayed_send(self, std::chrono::milliseconds(50), atoms::discover::value, name);
      pump(self);
      return;
    }
  });
  return {
    [=](const envelope& env) { on_envelope(self, env); },
    [=](atoms::task_done, const chunk_result& r) { on_task_done(self, r); },
    [=](atoms::task_flush) { flush(self); },
    [=](atoms::task_wait, const job_id& id, uint64_t seq) { on_wait_timeout(self, id, seq); },
    [=](atoms::discover, const std::string& name) { discover_proxy(self, name); },
    // `monkey status`: tasks waiting, and chunks handed to device proxies.
    [=](atoms::counts) {
      auto& st = self->state;
      return std::vector<uint64_t>{st.tasks.queued_tasks(),
                                   static_cast<uint64_t>(st.tasks.in_flight())};
    },
    // Retention: the journal deletes finished batches older than it; so does the book.
    [=](atoms::compact) {
      auto& st = self->state;
      if (auto n = st.tasks.forget_finished(now_ms() - st.cfg.retention_ms))
        st.log->info("retention: {} finished task batches forgotten", n);
      self->delayed_send(self, compact_every(st.cfg.retention_ms), atoms::compact::value);
    },
    [=](atoms::shutdown, bool drain) {
      auto& st = self->state;
      auto rp = self->make_response_promise();
      st.shutdown_waiters.push_back(rp);
      st.accepting = false;
      st.draining = drain;
      maybe_finish_shutdown(self);
    },
  };
}

} // namespace

caf::actor spawn_task_dispatch(caf::actor_system& sys, task_dispatch_config cfg,
                               caf::actor journal, caf::actor devices) {
  return sys.spawn(task_dispatch_impl, std::move(cfg), std::move(journal), std::move(devices));
}

} // namespace monkey
