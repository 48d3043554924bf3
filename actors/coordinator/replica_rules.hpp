// SPDX-License-Identifier: Apache-2.0
#pragma once
// The rules that keep a job's copies on several nodes consistent (docs/cluster.md,
// "Replica rules"). Plain C++: no CAF; every rule is a function of its inputs, unit-tested
// with a table of the races found under chaos (replica_rules.test.cpp).
//
// Versions are (ownership term << 20) + transitions within the term. Adoption, a drain's
// hand-over and a granted reservation start a new term. Which copy stands:
//   1. a final copy beats any copy that is not final: the first final state committed is
//      the job's result (an owner commits one only after every holder stored it);
//   2. of two copies that are not final, the higher version;
//   3. equal versions of different owners (two new terms from the same version): the lower
//      owner id, so that every node picks the same one;
//   4. two different final copies (never committed by these rules; kept for convergence):
//      the lower version, then the lower owner id.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/job.hpp"
#include "runtime/membership.hpp"

namespace monkey::replica {

constexpr int term_shift = 20;

inline uint64_t term_of(uint64_t version) { return version >> term_shift; }

/// The first version of the next ownership term.
inline uint64_t next_term(uint64_t version) {
  return (term_of(version) + 1) << term_shift;
}

/// What decides between copies, as a digest page carries it.
struct copy_stamp {
  bool final = false;
  uint64_t version = 0;
  uint64_t owner = 0;
};

copy_stamp stamp_of(const job_record& rec);

/// The rules above on stamps (two final copies of one version and owner compare equal).
int compare(const copy_stamp& a, const copy_stamp& b);

/// > 0 when copy `a` stands over copy `b`, < 0 when `b` does, 0 when they are the same copy.
int compare(const job_record& a, const job_record& b);

inline bool stands_over(const job_record& a, const job_record& b) { return compare(a, b) > 0; }

/// What a node does with a copy of a record sent to it (replication, anti-entropy, sync).
enum class incoming_action {
  ignore,            ///< it has this copy, or one that stands over it
  store_replica,     ///< keep it as a replica of another owner's job
  take_ownership,    ///< the copy names this node as the owner: it owns the job now
  give_up_ownership, ///< it names another owner and stands over this node's own record:
                     ///< this node's ownership and any attempt it runs are void
};

struct incoming_verdict {
  incoming_action action = incoming_action::ignore;
  bool answer_mine = false; ///< the sender's copy is behind: answer with this node's
};

/// `mine`: this node's copy (null when none); `owned`: whether this node owns it.
incoming_verdict judge_incoming(const job_record* mine, bool owned, const job_record& incoming,
                                const node_id& self);

/// What a holder answered when a final state was offered to it.
enum class holder_answer {
  stored,     ///< stored it, and had nothing that stands over it
  had_better, ///< has a copy that stands over it (adopted or granted elsewhere)
  no_answer,  ///< timeout, unreachable, or a write error there
};

struct final_verdict {
  enum kind_t {
    commit,     ///< every holder stored it: commit it locally, it is the job's result
    superseded, ///< a holder has a copy that stands over it: this outcome is void
    wait,       ///< some holders did not answer: keep the outcome pending and ask again
  } kind = wait;
  std::vector<std::string> missing; ///< holders that did not answer (kind == wait)
};

/// Decides a pending final state from its holders' answers (every holder other than the
/// owner must be in `answers`; one that is not counts as no_answer).
final_verdict decide_final(const job_record& rec, const std::string& self,
                           const std::map<std::string, holder_answer>& answers);

/// Whether the sync of a node back from a restart or a fence takes the cluster's `best`
/// copy instead of its own parked copy `mine`: when it stands over it, or when both are
/// final states that differ (this node's was kept through a fence but never committed: a
/// final state committed elsewhere stands, and no second one is committed).
bool sync_takes(const job_record& best, const job_record& mine);

/// The copy that stands among `copies` (null when empty).
const job_record* best_copy(const std::vector<job_record>& copies);

enum class adoption {
  adopt,         ///< this node adopts the job (a new ownership term)
  finished,      ///< the best copy is final: nothing to run
  owner_alive,   ///< the owner of the best copy is alive (or is this node)
  not_successor, ///< another surviving holder adopts it
  unknown,       ///< not every alive member answered: decide later
  unconfirmed,   ///< the best copy is this node's own, read back from its journal after a
                 ///< restart or kept through a fence, and no other member has it: this node
                 ///< may have been dropped as a holder meanwhile, so the job waits
};

/// After the owner of a job died or left: whether this node adopts it. `best` is the copy
/// that stands among this node's own and every alive member's copies; `all_answered`
/// says whether every alive member answered; `best_confirmed` that the best copy came from
/// another member or was confirmed by one since this node's restart or fence. The successor is the highest-ranked alive
/// holder of the best copy (the same choice on every node).
adoption decide_adoption(const job_record& best, const std::string& self, bool all_answered,
                         bool best_confirmed,
                         const std::function<member_state(const std::string&)>& state_of);

} // namespace monkey::replica
