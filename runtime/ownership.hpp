// SPDX-License-Identifier: Apache-2.0
#pragma once
// Who owns a job and who holds its replicas: rendezvous (highest-random-weight) hashing of
// a key over the members, so every node that sees the same members picks the same nodes,
// and losing a member moves only the jobs it held. Plain C++: no CAF. docs/cluster.md.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/expected.hpp"

namespace monkey {

/// The weight of `node` for `key` (64-bit, well mixed).
uint64_t rendezvous_weight(std::string_view key, std::string_view node);

/// `nodes` ordered by falling weight for `key`.
std::vector<std::string> rendezvous_rank(std::string_view key, std::vector<std::string> nodes);

/// A member as placement sees it.
struct holder_candidate {
  std::string node;
  int32_t cpus = 0;
  int32_t gpus = 0;
};

struct holders {
  std::string owner;                 ///< runs the job
  std::vector<std::string> replicas; ///< every holder of the record, the owner first
};

/// Owner: the highest-ranked member that can run the job (enough CPUs and GPUs); the other
/// holders: the next `r - 1` members by rank, able to run it or not. A failure says what no
/// member offers ("needs 2 gpus; no alive member has more than 0").
expected<holders> choose_holders(std::string_view key, int32_t cpus, int32_t gpus,
                                 const std::vector<holder_candidate>& alive, size_t r);

/// The holders a record should have: `first` (in order), then the nodes of `current` that
/// are in `alive`, then other members of `alive` by rendezvous rank of `key`, until there
/// are `r` (or fewer when too few are alive); never a node of `exclude`. One rule for every
/// place that picks holders: a submit (first = the owner), re-replication after a member
/// died (current = the record's holders), a drain's hand-over (first = the heir, exclude =
/// the leaving node) and a granted reservation (first = the new owner and the old one).
std::vector<std::string> holders_for(std::string_view key, const std::vector<std::string>& first,
                                     const std::vector<std::string>& current,
                                     const std::vector<std::string>& alive, size_t r,
                                     const std::vector<std::string>& exclude = {});

/// After the owner died: the highest-ranked of the surviving holders (empty when none).
std::string successor(std::string_view key, const std::vector<std::string>& surviving);

} // namespace monkey
