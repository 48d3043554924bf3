// SPDX-License-Identifier: Apache-2.0
// Submissions this node accepts as the owner: validation, client keys (deduplicated here
// and, for a retried submission, across the cluster), dependencies, holders, and the
// acknowledgement once every holder has the records (docs/cluster.md, "Submit").
#include "actors/coordinator/state.hpp"

#include "runtime/apps/schema.hpp"

#include "actors/fan_out.hpp"
#include "runtime/ownership.hpp"

namespace monkey {

namespace {

/// Answers the submits that waited for the first one with the same client key.
template <class Answer>
void settle_key(coordinator_state& st, const std::string& key, const Answer& answer) {
  if (key.empty())
    return;
  if (auto it = st.key_in_flight.find(key); it != st.key_in_flight.end()) {
    auto waiting = std::move(it->second);
    st.key_in_flight.erase(it);
    for (auto& w : waiting)
      w.deliver(answer);
  }
}

caf::error under_replicated(const std::vector<job_id>& ids, size_t copies, size_t wanted) {
  return make_error(errc::under_replicated,
                    "job " + ids.front().short_str()
                      + (ids.size() > 1 ? " (and " + std::to_string(ids.size() - 1) + " more)"
                                        : std::string{})
                      + " was journaled on its owner, but only " + std::to_string(copies)
                      + " of its " + std::to_string(wanted)
                      + " holders confirmed it: it may exist and run (monkey show "
                      + ids.front().short_str()
                      + "); submitting again with the same key returns it once its copies "
                        "are in place");
}

/// The jobs of a client key that this node has (owned or held), with their copies made
/// sure of again before they are acknowledged as a duplicate.
void answer_duplicate(coordinator_actor* self, caf::response_promise rp,
                      std::vector<job_id> ids) {
  auto& st = self->state;
  record_list owned;
  size_t wanted = 1;
  for (auto& id : ids)
    if (auto* rec = st.book.owned(id)) {
      owned.push_back(*rec);
      wanted = std::max(wanted, rec->replicas.size());
    }
  submit_reply r;
  r.ids = ids;
  r.duplicate = true;
  if (owned.empty())
    return rp.deliver(reply(r));
  replicate(self, owned, [=](persist_result res) mutable {
    if (res.copies >= wanted)
      return rp.deliver(reply(r));
    await_copies(self, ids, std::move(res.confirmed), [=](size_t copies, size_t want) mutable {
      if (copies < want)
        return rp.deliver(under_replicated(ids, copies, want));
      rp.deliver(reply(r));
    });
  });
}

/// The dependencies of `spec` that no member has (asked of every alive member when this
/// node does not know them); `done` gets the first missing one ("" when all exist).
void check_dependencies_exist(coordinator_actor* self, const job_spec& spec,
                              std::function<void(std::string)> done) {
  auto& st = self->state;
  std::vector<job_id> unknown;
  for (auto& d : spec.after)
    if (!st.book.find(d.job))
      unknown.push_back(d.job);
  if (unknown.empty())
    return done({});
  auto found = std::make_shared<std::set<job_id>>();
  fan_out(
    self, st.membership, st.view.others_alive(), verb::peer_fetch,
    encode(fetch_request{st.self_node(), unknown}), peer_timeout::fetch,
    [=](const peer_answer& a) {
      if (!a)
        return;
      if (auto r = decode<replicate_request>(*a.body, "fetch"))
        for (auto& rec : r->records) {
          found->insert(rec.id);
          auto& rs = self->state.remote[rec.id];
          rs.exists = true;
          rs.state = rec.state;
          rs.learned_ms = now_ms();
        }
    },
    [=] {
      for (auto& id : unknown)
        if (!found->count(id))
          return done(id.str());
      done({});
    });
}

void accept_new(coordinator_actor* self, caf::response_promise rp, submit_request req);

} // namespace

void jobs_with_key(coordinator_actor* self, const std::string& key,
                   std::function<void(std::set<job_id>)> then) {
  auto& st = self->state;
  list_request lookup;
  lookup.local = true;
  lookup.key = key;
  auto found = std::make_shared<std::set<job_id>>();
  fan_out(
    self, st.membership, st.view.others_alive(), verb::list, encode(lookup), peer_timeout::fetch,
    [=](const peer_answer& a) {
      if (!a)
        return;
      if (auto r = decode<list_reply>(*a.body, "jobs"))
        for (auto& s : r->jobs)
          found->insert(s.id);
    },
    [=] { then(std::move(*found)); });
}

namespace {

/// An app job names an app some alive member has; its parameters fit the app's schema.
/// The build is chosen here (this node's, else the most common) and kept in the spec, so
/// that only nodes with that build run it.
status check_app(const coordinator_state& st, job_spec& spec) {
  auto& members = st.view.members();
  if (!spec.app_build.empty() && !find_build(members, spec.app, spec.app_build))
    return failure{"app: no alive node has build " + spec.app_build + " of app '" + spec.app
                   + "'"};
  auto* app = spec.app_build.empty() ? find_app(members, spec.app, st.self_node())
                                     : find_build(members, spec.app, spec.app_build);
  if (!app)
    return failure{"app: no node of the cluster has an app '" + spec.app + "' (known apps: "
                   + known_apps(members)
                   + "); a node offers the monkey-app-* executables in its --app-dir"};
  auto schema = parse_app_schema(app->schema);
  if (!schema)
    return failure{"app " + spec.app + ": " + schema.error()};
  if (auto bad = check_params(*schema, spec.params); !bad)
    return bad;
  spec.app_build = app->build;
  spec.extra_ranks = extra_ranks(*schema, spec.params);
  if (auto bad = validate(spec); !bad)
    return bad;
  return {};
}

} // namespace

void accept_submit(coordinator_actor* self, caf::response_promise rp, submit_request req) {
  auto& st = self->state;
  if (!st.accepting)
    return rp.deliver(make_error(errc::refused, "the node is shutting down and accepts no jobs"));
  if (!st.view.majority())
    return rp.deliver(make_error(errc::refused, st.view.minority_text()
                                                  + "; submissions are refused until it heals"));
  if (req.deadline_ms > 0 && now_ms() > req.deadline_ms)
    return rp.deliver(make_error(errc::unavailable, "the forwarded submission arrived after its "
                                                    "deadline; the forwarding node tries another "
                                                    "owner"));
  if (auto problem = validate(req.spec); !problem)
    return rp.deliver(make_error(errc::bad_request, "invalid job spec: " + problem.error()));
  if (req.spec.array_index >= 0)
    return rp.deliver(make_error(errc::bad_request, "array_index: set by the node, not by clients"));
  if (!req.spec.app.empty())
    if (auto bad = check_app(st, req.spec); !bad)
      return rp.deliver(make_error(errc::bad_request, bad.error()));
  auto key = req.client_key;
  if (!key.empty()) {
    if (auto ids = st.book.by_key(key); !ids.empty())
      return answer_duplicate(self, rp, ids);
    if (auto it = st.key_in_flight.find(key); it != st.key_in_flight.end()) {
      it->second.push_back(rp);
      return;
    }
    st.key_in_flight[key];
  }
  auto go_on = [=]() mutable {
    check_dependencies_exist(self, req.spec, [=](std::string missing) mutable {
      if (!missing.empty()) {
        auto e = make_error(errc::bad_request, "after: no job " + missing + " in the cluster");
        settle_key(self->state, key, e);
        return rp.deliver(e);
      }
      accept_new(self, rp, std::move(req));
    });
  };
  // A retried submission may have been accepted by another owner before (its answer was
  // lost): every alive member is asked for the key first.
  if (!req.retry || key.empty() || st.view.others_alive().empty())
    return go_on();
  jobs_with_key(self, key, [=](std::set<job_id> found) mutable {
    if (found.empty())
      return go_on();
    submit_reply r;
    r.ids.assign(found.begin(), found.end());
    r.duplicate = true;
    auto body = reply(r);
    settle_key(self->state, key, body);
    rp.deliver(body);
  });
}

namespace {

/// The records of a new submission (one per array index) owned by this node.
record_list new_records(coordinator_state& st, const submit_request& req,
                        const std::vector<std::string>& replicas) {
  std::vector<int32_t> indices{-1};
  if (!req.spec.array.empty())
    indices = *expand_array(req.spec.array);
  record_list recs;
  auto now = now_ms();
  for (auto idx : indices) {
    job_record rec;
    rec.id = job_id::generate();
    rec.spec = req.spec;
    rec.spec.array_index = idx;
    if (idx >= 0)
      rec.spec.seed = req.spec.seed + static_cast<uint64_t>(idx);
    rec.owner = st.cfg.node;
    rec.submit_seq = st.book.next_seq();
    rec.submitted_ms = now;
    rec.client_key = req.client_key;
    rec.replicas = replicas;
    touch(rec, job_state::queued, "submitted", now);
    recs.push_back(std::move(rec));
  }
  return recs;
}

/// Why this node cannot accept `count` more jobs now (none when it can).
caf::error cannot_accept(const coordinator_state& st, size_t count, size_t holders) {
  if (st.book.queue().size() + count > st.cfg.max_queued)
    return make_error(errc::busy, "the node's queue is full ("
                                    + std::to_string(st.book.queue().size())
                                    + " queued jobs, --max-queued "
                                    + std::to_string(st.cfg.max_queued) + "): try again later");
  if (holders < st.cfg.min_replicas)
    return make_error(
      errc::refused, "only " + std::to_string(holders)
                       + " members are alive to hold the job, fewer than --min-replicas "
                       + std::to_string(st.cfg.min_replicas)
                       + ": the submission is refused so that no accepted job can be lost");
  return {};
}

void accept_new(coordinator_actor* self, caf::response_promise rp, submit_request req) {
  auto& st = self->state;
  auto key = req.client_key;
  if (!req.spec.has_seed) {
    random_bytes(&req.spec.seed, sizeof(req.spec.seed));
    req.spec.seed &= 0x7FFFFFFFFFFFFFFFull;
    req.spec.has_seed = true;
  }
  // Holders: this node first, then the other alive members by rendezvous rank of the key.
  auto replicas = holders_for(key.empty() ? job_id::generate().str() : key, {st.self_node()}, {},
                              st.view.alive_nodes(), st.cfg.replicas);
  auto count = req.spec.array.empty() ? size_t{1} : expand_array(req.spec.array)->size();
  if (auto e = cannot_accept(st, count, replicas.size())) {
    settle_key(st, key, e);
    return rp.deliver(std::move(e));
  }
  auto recs = new_records(st, req, replicas);
  auto wanted = replicas.size();
  for (auto& rec : recs)
    st.submitting.insert(rec.id);
  persist(self, recs, [=](const persist_result& res) mutable {
    auto& st = self->state;
    for (auto& rec : recs)
      st.submitting.erase(rec.id);
    if (res.local) {
      auto e = make_error(errc::journal_failure,
                          "the job could not be made durable: " + describe(res.local));
      settle_key(st, key, e);
      return rp.deliver(e);
    }
    submit_reply r;
    for (auto& rec : recs) {
      r.ids.push_back(rec.id);
      // (A copy that stands over the submitted one may be here already, e.g. a holder
      // that answered with a newer one: it is never replaced by the older.)
      auto* mine = st.book.find(rec.id);
      if (!mine || replica::compare(rec, *mine) > 0)
        st.book.own(rec);
    }
    request_schedule(self);
    auto acknowledge = [=](size_t copies, size_t want) mutable {
      // Journaled here, but not on every holder: say so rather than acknowledge a promise
      // that does not hold. Re-replication and anti-entropy go on bringing the copies.
      if (copies < want) {
        auto e = under_replicated(r.ids, copies, want);
        settle_key(self->state, key, e);
        return rp.deliver(e);
      }
      auto body = reply(r);
      settle_key(self->state, key, body);
      rp.deliver(body);
    };
    if (res.copies >= wanted)
      return acknowledge(res.copies, wanted);
    // A holder did not confirm (it may have died or frozen since it was chosen): it is
    // asked again, and replaced once declared dead, until failure detection plus a retry.
    await_copies(self, r.ids, res.confirmed, acknowledge);
  });
}

} // namespace

} // namespace monkey
