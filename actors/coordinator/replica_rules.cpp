// SPDX-License-Identifier: Apache-2.0
#include "actors/coordinator/replica_rules.hpp"

#include "runtime/ownership.hpp"

namespace monkey::replica {

copy_stamp stamp_of(const job_record& rec) {
  return {is_final(rec.state), rec.version, rec.owner.value};
}

int compare(const copy_stamp& a, const copy_stamp& b) {
  if (a.final != b.final)
    return a.final ? 1 : -1;
  if (a.version != b.version) // two finals: the earlier stands; else the later
    return (a.final ? a.version < b.version : a.version > b.version) ? 1 : -1;
  if (a.owner != b.owner)
    return a.owner < b.owner ? 1 : -1;
  return 0;
}

int compare(const job_record& a, const job_record& b) {
  if (auto c = compare(stamp_of(a), stamp_of(b)); c != 0)
    return c;
  if (is_final(a.state) && a.reason != b.reason) // never committed twice; for convergence
    return a.reason < b.reason ? 1 : -1;
  return 0;
}

incoming_verdict judge_incoming(const job_record* mine, bool owned, const job_record& incoming,
                                const node_id& self) {
  incoming_verdict v;
  bool names_me = incoming.owner == self;
  if (!mine) {
    v.action = names_me ? incoming_action::take_ownership : incoming_action::store_replica;
    return v;
  }
  auto c = compare(incoming, *mine);
  if (c < 0) {
    v.answer_mine = true;
    return v;
  }
  if (c == 0)
    return v;
  if (names_me)
    v.action = incoming_action::take_ownership;
  else if (owned)
    v.action = incoming_action::give_up_ownership;
  else
    v.action = incoming_action::store_replica;
  return v;
}

final_verdict decide_final(const job_record& rec, const std::string& self,
                           const std::map<std::string, holder_answer>& answers) {
  final_verdict v;
  v.kind = final_verdict::commit;
  for (auto& h : rec.replicas) {
    if (h == self)
      continue;
    auto it = answers.find(h);
    auto a = it == answers.end() ? holder_answer::no_answer : it->second;
    if (a == holder_answer::had_better) {
      v.kind = final_verdict::superseded;
      v.missing.clear();
      return v;
    }
    if (a == holder_answer::no_answer) {
      v.kind = final_verdict::wait;
      v.missing.push_back(h);
    }
  }
  return v;
}

const job_record* best_copy(const std::vector<job_record>& copies) {
  const job_record* best = nullptr;
  for (auto& c : copies)
    if (!best || stands_over(c, *best))
      best = &c;
  return best;
}

bool sync_takes(const job_record& best, const job_record& mine) {
  return stands_over(best, mine)
         || (is_final(best.state) && is_final(mine.state) && compare(best, mine) != 0);
}

adoption decide_adoption(const job_record& best, const std::string& self, bool all_answered,
                         bool best_confirmed,
                         const std::function<member_state(const std::string&)>& state_of) {
  if (is_final(best.state))
    return adoption::finished;
  auto owner = best.owner.str();
  if (owner == self)
    return adoption::owner_alive;
  auto os = state_of(owner);
  if (os == member_state::alive || os == member_state::suspect)
    return adoption::owner_alive;
  if (!all_answered)
    return adoption::unknown;
  if (!best_confirmed)
    return adoption::unconfirmed;
  std::vector<std::string> surviving;
  for (auto& h : best.replicas)
    if (h == self || state_of(h) == member_state::alive)
      surviving.push_back(h);
  return successor(best.id.str(), surviving) == self ? adoption::adopt : adoption::not_successor;
}

} // namespace monkey::replica
