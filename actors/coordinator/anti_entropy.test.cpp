// SPDX-License-Identifier: Apache-2.0
#include "actors/coordinator/anti_entropy.hpp"

#include <map>

#include <catch2/catch.hpp>

using namespace monkey;

TEST_CASE("digest pages list the records naming the asker, in id order, page by page",
          "[coordinator][anti_entropy]") {
  std::vector<job_record> recs(10);
  for (auto& r : recs) {
    r.id = job_id::generate();
    r.owner = node_id{1};
    r.version = 3;
    r.replicas = {"a", "b"};
  }
  recs[4].replicas = {"a", "c"}; // not b's
  std::vector<const job_record*> ptrs;
  for (auto& r : recs)
    ptrs.push_back(&r);
  std::vector<job_id> seen;
  std::string cursor;
  for (int page = 0; page < 10; ++page) {
    auto d = digest_page(ptrs, "b", cursor, 4);
    for (auto& e : d.entries)
      seen.push_back(e.id);
    for (size_t i = 1; i < d.entries.size(); ++i)
      CHECK(d.entries[i - 1].id < d.entries[i].id);
    if (!d.more)
      break;
    cursor = d.entries.back().id.str();
  }
  CHECK(seen.size() == 9);
  CHECK(std::find(seen.begin(), seen.end(), recs[4].id) == seen.end());
}

TEST_CASE("a page diff fetches what stands over the asker's copy and pushes the asker's own",
          "[coordinator][anti_entropy]") {
  job_record mine_old, mine_new, mine_final;
  for (auto* r : {&mine_old, &mine_new, &mine_final}) {
    r->id = job_id::generate();
    r->owner = node_id{1};
  }
  mine_old.version = 2;
  mine_new.version = 9;
  mine_final.version = 4;
  mine_final.state = job_state::succeeded;
  auto missing = job_id::generate();
  digest_reply page;
  page.entries = {{mine_old.id, 5, false, node_id{1}.str()},
                  {mine_new.id, 7, false, node_id{1}.str()},
                  {mine_final.id, 1u << 20, false, node_id{2}.str()}, // a later term, not final
                  {missing, 1, false, node_id{1}.str()}};
  std::map<job_id, job_record*> mine{{mine_old.id, &mine_old},
                                     {mine_new.id, &mine_new},
                                     {mine_final.id, &mine_final}};
  auto d = diff_page(page, [&](const job_id& id) -> const job_record* {
    auto it = mine.find(id);
    return it == mine.end() ? nullptr : it->second;
  });
  CHECK(d.fetch == std::vector<job_id>{mine_old.id, missing});
  // A final copy stands over a later term that is not final: the asker sends it.
  CHECK(d.push == std::vector<job_id>{mine_new.id, mine_final.id});
}
