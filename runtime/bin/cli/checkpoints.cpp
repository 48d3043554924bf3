// SPDX-License-Identifier: Apache-2.0
// monkey checkpoints ID: a job's checkpoint pieces on the alive members, which of them hold
// each, and the step a new attempt would resume at (docs/checkpoints.md).
#include "runtime/bin/cli/cli.hpp"

#include <iostream>

namespace monkey::cli {

namespace {

std::string size_text(uint64_t bytes) {
  char buf[32];
  if (bytes >= (1ull << 30))
    std::snprintf(buf, sizeof(buf), "%.1f GB", static_cast<double>(bytes) / (1ull << 30));
  else if (bytes >= (1ull << 20))
    std::snprintf(buf, sizeof(buf), "%.1f MB", static_cast<double>(bytes) / (1ull << 20));
  else if (bytes >= 1024)
    std::snprintf(buf, sizeof(buf), "%.1f KB", static_cast<double>(bytes) / 1024);
  else
    std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(bytes));
  return buf;
}

int run_checkpoints(context& ctx, const std::string& id) {
  auto c = ctx.connect();
  if (!c)
    return fail(c.error());
  auto s = (*c)->call<show_reply>(verb::show, id_request{id});
  if (!s)
    return fail("checkpoints: " + s.error());
  auto job = s->record.id.str();
  auto r = (*c)->call<ckpt_status_reply>(verb::checkpoints, ckpt_list_request{job});
  if (!r)
    return fail("checkpoints: " + r.error());
  auto names = node_names(ctx);
  if (ctx.g.json) {
    json pieces = json::array();
    for (auto& p : r->pieces) {
      json files = json::array();
      for (auto& f : p.piece.files)
        files.push_back({{"name", f.name}, {"size", f.size}, {"sha256", f.sha256}});
      pieces.push_back({{"step", p.piece.step}, {"label", p.piece.label},
                        {"world", p.piece.world}, {"bytes", p.piece.bytes()},
                        {"created_ms", p.piece.created_ms}, {"nodes", p.nodes},
                        {"files", files}});
    }
    std::cout << json{{"job", job}, {"complete_step", r->complete_step}, {"asked", r->asked},
                      {"answered", r->answered}, {"pieces", pieces}}
                   .dump()
              << "\n";
    return 0;
  }
  std::printf("job %s: %s (%d of %d alive members answered)\n", job.c_str(),
              r->complete_step >= 0
                ? ("a new attempt resumes at step " + std::to_string(r->complete_step)).c_str()
                : "no complete checkpoint: a new attempt starts from scratch",
              r->answered, r->asked);
  if (r->pieces.empty())
    return 0;
  std::printf("%-10s %-16s %10s  %-8s  %s\n", "STEP", "PIECE", "SIZE", "SAVED", "ON");
  for (auto& p : r->pieces) {
    std::string on;
    for (auto& n : p.nodes)
      on += (on.empty() ? "" : ", ") + name_of(names, n);
    std::printf("%-10lld %-16s %10s  %-8s  %s\n", static_cast<long long>(p.piece.step),
                p.piece.label.c_str(), size_text(p.piece.bytes()).c_str(),
                clock_time(p.piece.created_ms).c_str(), on.c_str());
  }
  return 0;
}

} // namespace

verb_def add_checkpoints(CLI::App& app) {
  auto id = std::make_shared<std::string>();
  auto* s = app.add_subcommand("checkpoints",
                               "a job's checkpoints: the pieces of its newest steps, the "
                               "nodes that hold each, and the step a new attempt resumes at");
  s->add_option("ID", *id, "job id (full or a unique suffix)")->required();
  return {s, [id](context& ctx) { return run_checkpoints(ctx, *id); }};
}

} // namespace monkey::cli
