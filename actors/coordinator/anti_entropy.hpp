// SPDX-License-Identifier: Apache-2.0
#pragma once
// Anti-entropy pages (docs/cluster.md): a node asks a peer for one page of (id, stamp) of
// the records the peer has that list the asker among their holders, fetches the copies
// that stand over its own and sends back its own that stand over the peer's. Plain C++:
// no CAF; anti_entropy.test.cpp.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "actors/coordinator/replica_rules.hpp"
#include "runtime/wire/messages/client.hpp"

namespace monkey {

/// One page of the digest for `from`: ids after `after` ("" from the start), ascending, at
/// most `limit`; `more` when more follow. `records` yields every copy this node has once
/// (its best copy of each job).
digest_reply digest_page(const std::vector<const job_record*>& records, const std::string& from,
                         const std::string& after, uint32_t limit);

/// What a digest page means for the asker: the ids to fetch (the peer's copy stands over
/// the asker's, or the asker has none) and the ids whose own copy to send back (it stands
/// over the peer's). `mine` answers the asker's copy of an id (null when none).
struct page_diff {
  std::vector<job_id> fetch;
  std::vector<job_id> push;
};

page_diff diff_page(const digest_reply& page,
                    const std::function<const job_record*(const job_id&)>& mine);

replica::copy_stamp stamp_of(const digest_entry& e);

} // namespace monkey
