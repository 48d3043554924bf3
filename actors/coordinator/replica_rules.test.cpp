// SPDX-License-Identifier: Apache-2.0
// The replica rules against the races found under chaos (issue #8): each row is one
// interleaving, reduced to the copies that meet and what each node must do.
#include "actors/coordinator/replica_rules.hpp"

#include <catch2/catch.hpp>

using namespace monkey;
using namespace monkey::replica;

namespace {

const node_id A{0xA}, B{0xB}, C{0xC};

job_record copy(node_id owner, uint64_t term, uint64_t n, job_state state,
                std::vector<std::string> holders = {}, std::string reason = {}) {
  job_record r;
  r.id = *job_id::parse("01ARZ3NDEKTSV4RRFFQ69G5FAV");
  r.owner = owner;
  r.version = (term << term_shift) + n;
  r.state = state;
  r.replicas = holders.empty() ? std::vector<std::string>{owner.str()} : holders;
  r.reason = reason.empty() ? std::string(to_string(state)) : reason;
  return r;
}

} // namespace

TEST_CASE("which copy stands: a final one, then the later version, then the lower owner",
          "[coordinator][replica]") {
  struct row {
    const char* race;
    job_record a, b;
    int expect; // sign of compare(a, b)
  };
  std::vector<row> rows{
    {"the owner's final state meets an adopter's running copy of a later term",
     copy(A, 0, 5, job_state::succeeded), copy(B, 1, 2, job_state::running), 1},
    {"a stale replica (queued) meets the running record of the same term",
     copy(A, 0, 1, job_state::queued), copy(A, 0, 3, job_state::running), -1},
    {"an adopter's copy (new term) meets the cut-off owner's later transitions",
     copy(B, 1, 1, job_state::queued), copy(A, 0, 7, job_state::running), 1},
    {"a late grant and a re-offer both start a term from the same version",
     copy(B, 1, 1, job_state::queued), copy(C, 1, 1, job_state::queued), 1},
    {"two final states of different terms (never committed; the earlier stands)",
     copy(A, 0, 5, job_state::succeeded), copy(B, 1, 3, job_state::succeeded), 1},
    {"the same final copy on two holders", copy(A, 0, 5, job_state::failed),
     copy(A, 0, 5, job_state::failed), 0},
  };
  for (auto& r : rows) {
    INFO(r.race);
    CHECK((compare(r.a, r.b) > 0 ? 1 : compare(r.a, r.b) < 0 ? -1 : 0) == r.expect);
    CHECK((compare(r.b, r.a) > 0 ? 1 : compare(r.b, r.a) < 0 ? -1 : 0) == -r.expect);
    CHECK(compare(stamp_of(r.a), stamp_of(r.b)) * compare(stamp_of(r.b), stamp_of(r.a)) <= 0);
  }
  CHECK(next_term(copy(A, 3, 17, job_state::queued).version) == (uint64_t{4} << term_shift));
}

TEST_CASE("what a node does with a copy it receives", "[coordinator][replica]") {
  struct row {
    const char* race;
    bool have;
    job_record mine;
    bool owned;
    job_record incoming;
    node_id self;
    incoming_action action;
    bool answer_mine;
  };
  std::vector<row> rows{
    {"a first copy of another owner's job", false, {}, false, copy(A, 0, 1, job_state::queued),
     B, incoming_action::store_replica, false},
    {"a hand-over or a grant names this node", false, {}, false,
     copy(B, 1, 1, job_state::queued), B, incoming_action::take_ownership, false},
    {"a stale replica meets a newer one", true, copy(A, 0, 1, job_state::queued), false,
     copy(A, 0, 4, job_state::running), B, incoming_action::store_replica, false},
    {"the cut-off owner's transition reaches the adopter (it answers with its copy)", true,
     copy(B, 1, 2, job_state::running), true, copy(A, 0, 6, job_state::running), B,
     incoming_action::ignore, true},
    {"the owner learns its job was adopted: its ownership and attempt are void", true,
     copy(A, 0, 6, job_state::running), true, copy(B, 1, 2, job_state::running), A,
     incoming_action::give_up_ownership, false},
    {"the owner's final state reaches an adopter still running: the final stands", true,
     copy(B, 1, 2, job_state::running), true, copy(A, 0, 7, job_state::succeeded), B,
     incoming_action::give_up_ownership, false},
    {"a late grant meets the owner that runs the job itself", true,
     copy(A, 0, 3, job_state::running), true, copy(C, 1, 1, job_state::queued), A,
     incoming_action::give_up_ownership, false},
    {"a holder has this node's own later transitions (sync after a restart)", true,
     copy(A, 0, 3, job_state::running), false, copy(A, 0, 5, job_state::succeeded), A,
     incoming_action::take_ownership, false},
    {"the same copy again (delivered twice)", true, copy(A, 0, 3, job_state::running), false,
     copy(A, 0, 3, job_state::running), B, incoming_action::ignore, false},
  };
  for (auto& r : rows) {
    INFO(r.race);
    auto v = judge_incoming(r.have ? &r.mine : nullptr, r.owned, r.incoming, r.self);
    CHECK(v.action == r.action);
    CHECK(v.answer_mine == r.answer_mine);
  }
}

TEST_CASE("a final state is committed only when every holder stored it",
          "[coordinator][replica]") {
  auto rec = copy(A, 0, 5, job_state::succeeded, {A.str(), B.str(), C.str()});
  using H = holder_answer;
  CHECK(decide_final(rec, A.str(), {{B.str(), H::stored}, {C.str(), H::stored}}).kind
        == final_verdict::commit);
  // A holder that adopted (or was granted) the job answers with its copy: void here.
  CHECK(decide_final(rec, A.str(), {{B.str(), H::stored}, {C.str(), H::had_better}}).kind
        == final_verdict::superseded);
  // A timeout never commits (the holder may have adopted meanwhile): ask again.
  auto wait = decide_final(rec, A.str(), {{B.str(), H::stored}, {C.str(), H::no_answer}});
  CHECK(wait.kind == final_verdict::wait);
  CHECK(wait.missing == std::vector<std::string>{C.str()});
  // A holder that is not in the answers counts as not answering.
  CHECK(decide_final(rec, A.str(), {{B.str(), H::stored}}).kind == final_verdict::wait);
  // No other holder: commit.
  CHECK(decide_final(copy(A, 0, 5, job_state::failed), A.str(), {}).kind
        == final_verdict::commit);
}

TEST_CASE("adoption reads every member's copy and trusts no unconfirmed one",
          "[coordinator][replica]") {
  auto states = [](std::map<std::string, member_state> m) {
    return [m](const std::string& n) {
      auto it = m.find(n);
      return it == m.end() ? member_state::dead : it->second;
    };
  };
  auto all_alive_but_a = states({{B.str(), member_state::alive}, {C.str(), member_state::alive}});
  auto running = copy(A, 0, 3, job_state::running, {A.str(), B.str(), C.str()});
  // Exactly one of the surviving holders adopts: the successor by rank.
  auto b = decide_adoption(running, B.str(), true, true, all_alive_but_a);
  auto c = decide_adoption(running, C.str(), true, true, all_alive_but_a);
  CHECK(((b == adoption::adopt) != (c == adoption::adopt)));
  CHECK((b == adoption::not_successor || c == adoption::not_successor));
  // An adopter reading the copies finds the final state on another holder: nothing to run.
  CHECK(decide_adoption(copy(A, 0, 4, job_state::succeeded), B.str(), true, true,
                        all_alive_but_a)
        == adoption::finished);
  // The owner is only suspect: no adoption.
  CHECK(decide_adoption(running, B.str(), true, true,
                        states({{A.str(), member_state::suspect},
                                {B.str(), member_state::alive}}))
        == adoption::owner_alive);
  // Not every alive member answered: decide later.
  CHECK(decide_adoption(running, B.str(), false, true, all_alive_but_a) == adoption::unknown);
  // A restarted node's own copy, read back from its journal, that no member confirms.
  CHECK(decide_adoption(running, B.str(), true, false, all_alive_but_a)
        == adoption::unconfirmed);
  // A holder dropped from the best copy does not adopt it.
  auto moved = copy(A, 0, 5, job_state::running, {A.str(), C.str()});
  CHECK(decide_adoption(moved, B.str(), true, true, all_alive_but_a)
        == adoption::not_successor);
  // The best copy of several.
  std::vector<job_record> copies{copy(A, 0, 2, job_state::queued),
                                 copy(A, 0, 5, job_state::running),
                                 copy(A, 0, 4, job_state::succeeded)};
  REQUIRE(best_copy(copies));
  CHECK(best_copy(copies)->state == job_state::succeeded);
  CHECK(best_copy({}) == nullptr);
}

TEST_CASE("a node back from a fence keeps its known outcome unless another final stands",
          "[coordinator][replica]") {
  // Found by the chaos soak (seed 7009): the owner ended attempt 1 (exit 0), a holder stored
  // the final state, and the owner was declared dead before every holder had answered. The
  // fence used to put the record back to "running" and the sync, not reaching that holder,
  // ran the job again: a second final state. The final state is now kept through the fence.
  struct row {
    const char* race;
    job_record best, mine;
    bool takes;
  };
  auto mine_final = copy(A, 0, 4, job_state::succeeded, {A.str(), B.str()}, "attempt 1: exit 0");
  std::vector<row> rows{
    {"nobody has anything newer than this node's kept final state",
     copy(A, 0, 3, job_state::running), mine_final, false},
    {"a holder has this very final state", mine_final, mine_final, false},
    {"an adopter runs attempt 2 in a later term: the known final state still stands",
     copy(B, 1, 2, job_state::running), mine_final, false},
    {"an adopter committed its own final state: it stands, none is committed twice",
     copy(B, 1, 3, job_state::succeeded, {B.str(), C.str()}, "attempt 2: exit 0"), mine_final,
     true},
    {"a restarted node's running record meets a holder's final state of its own attempt",
     mine_final, copy(A, 0, 3, job_state::running), true},
    {"a restarted node's running record meets an adopter's running copy",
     copy(B, 1, 2, job_state::running), copy(A, 0, 3, job_state::running), true},
    {"a stale replica does not replace the parked record",
     copy(A, 0, 1, job_state::queued), copy(A, 0, 3, job_state::running), false},
  };
  for (auto& r : rows) {
    INFO(r.race);
    CHECK(sync_takes(r.best, r.mine) == r.takes);
  }
}
