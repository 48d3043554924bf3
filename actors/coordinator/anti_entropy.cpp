// SPDX-License-Identifier: Apache-2.0
#include "actors/coordinator/anti_entropy.hpp"

#include <algorithm>

namespace monkey {

digest_reply digest_page(const std::vector<const job_record*>& records, const std::string& from,
                         const std::string& after, uint32_t limit) {
  auto cursor = job_id::parse(after);
  limit = std::clamp<uint32_t>(limit, 1, 4096);
  std::vector<digest_entry> all;
  for (auto* rec : records) {
    if (cursor && !(*cursor < rec->id))
      continue;
    if (std::find(rec->replicas.begin(), rec->replicas.end(), from) == rec->replicas.end())
      continue;
    all.push_back({rec->id, rec->version, is_final(rec->state), rec->owner.str()});
  }
  auto by_id = [](const digest_entry& a, const digest_entry& b) { return a.id < b.id; };
  digest_reply r;
  r.more = all.size() > limit;
  if (r.more)
    std::nth_element(all.begin(), all.begin() + limit, all.end(), by_id);
  all.resize(std::min<size_t>(all.size(), limit));
  std::sort(all.begin(), all.end(), by_id);
  r.entries = std::move(all);
  return r;
}

replica::copy_stamp stamp_of(const digest_entry& e) {
  auto owner = node_id::parse(e.owner);
  return {e.final, e.version, owner ? owner->value : 0};
}

page_diff diff_page(const digest_reply& page,
                    const std::function<const job_record*(const job_id&)>& mine) {
  page_diff d;
  for (auto& e : page.entries) {
    auto* rec = mine(e.id);
    if (!rec) {
      d.fetch.push_back(e.id);
      continue;
    }
    auto c = replica::compare(stamp_of(e), replica::stamp_of(*rec));
    if (c > 0)
      d.fetch.push_back(e.id);
    else if (c < 0)
      d.push.push_back(e.id);
  }
  return d;
}

} // namespace monkey
