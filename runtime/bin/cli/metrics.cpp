// SPDX-License-Identifier: Apache-2.0
// monkey metrics ID: every metric point of a job, for a plotting script. One row per point,
// the columns job, attempt, rank, step, time, key, value (docs/cli.md, "Metrics").
#include "runtime/bin/cli/cli.hpp"

#include "runtime/sweep/space.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <tuple>

namespace monkey::cli {

namespace {

enum class metric_format { table, csv, jsonl, json };

/// "2026-12-07T16:31:43.900Z": UTC, milliseconds, what pandas and JSON readers parse.
std::string utc_time(int64_t ms) {
  time_t t = ms / 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof(out), "%s.%03dZ", buf, static_cast<int>(ms % 1000));
  return out;
}

/// A CSV field: quoted when it holds a comma, a quote or a line break.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos)
    return s;
  std::string out = "\"";
  for (char ch : s)
    out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

json row_json(const std::string& job, const metric_point& p) {
  return {{"job", job},   {"attempt", p.attempt},         {"rank", p.rank}, {"step", p.step},
          {"time", utc_time(p.ts_ms)}, {"key", p.key}, {"value", p.value}};
}

int run_metrics(context& ctx, const std::string& id, const std::vector<std::string>& wanted,
                metric_format format) {
  auto c = ctx.connect();
  if (!c)
    return fail(c.error());
  auto first = (*c)->call<show_reply>(verb::show, id_request{id});
  if (!first)
    return fail("metrics: " + first.error());
  auto job = first->record.id.str();
  std::vector<std::string> keys;
  if (wanted.empty()) {
    for (auto& [k, s] : first->metric_history)
      keys.push_back(k);
  } else {
    for (auto& k : wanted) {
      if (first->metric_history.count(k))
        continue;
      std::string has;
      for (auto& [name, s] : first->metric_history)
        has += (has.empty() ? "" : ", ") + name;
      return fail("metrics: job " + first->record.id.short_str() + " has no metric '" + k + "'"
                  + (has.empty() ? " (it has no metrics)" : " (it has: " + has + ")"));
    }
    keys = wanted;
  }
  std::vector<metric_point> rows;
  for (auto& k : keys) {
    id_request req{id};
    req.metric = k;
    auto r = (*c)->call<show_reply>(verb::show, req);
    if (!r)
      return fail("metrics: " + k + ": " + r.error());
    auto listed = r->metric_history.count(k) ? r->metric_history.at(k).count : 0;
    if (static_cast<int64_t>(r->series.size()) < listed)
      std::fprintf(stderr,
                   "monkey: metrics: %s: %zu of its %lld points (a node answers with at most "
                   "100000 points a key)\n",
                   k.c_str(), r->series.size(), static_cast<long long>(listed));
    for (auto& p : r->series) {
      rows.push_back(p);
      rows.back().key = k;
    }
  }
  std::stable_sort(rows.begin(), rows.end(), [](const metric_point& a, const metric_point& b) {
    return std::tie(a.key, a.attempt, a.rank, a.step, a.ts_ms)
           < std::tie(b.key, b.attempt, b.rank, b.step, b.ts_ms);
  });
  switch (format) {
    case metric_format::json: {
      json all = json::array();
      for (auto& p : rows)
        all.push_back(row_json(job, p));
      std::cout << all.dump(2) << "\n";
      break;
    }
    case metric_format::jsonl:
      for (auto& p : rows)
        std::cout << row_json(job, p).dump() << "\n";
      break;
    case metric_format::csv:
      std::cout << "job,attempt,rank,step,time,key,value\n";
      for (auto& p : rows)
        std::cout << job << ',' << p.attempt << ',' << p.rank << ',' << p.step << ','
                  << utc_time(p.ts_ms) << ',' << csv_field(p.key) << ',' << sweep::value_text(p.value)
                  << "\n";
      break;
    case metric_format::table:
      if (rows.empty()) {
        std::printf("job %s has no metrics\n", first->record.id.short_str().c_str());
        break;
      }
      std::printf("%-7s  %-4s  %-8s  %-24s  %-16s  %s\n", "ATTEMPT", "RANK", "STEP", "TIME (UTC)",
                  "KEY", "VALUE");
      for (auto& p : rows)
        std::printf("%-7d  %-4d  %-8lld  %-24s  %-16s  %s\n", p.attempt, p.rank,
                    static_cast<long long>(p.step), utc_time(p.ts_ms).c_str(), p.key.c_str(),
                    sweep::value_text(p.value).c_str());
      break;
  }
  std::cout.flush();
  return 0;
}

} // namespace

verb_def add_metrics(CLI::App& app) {
  struct options {
    std::string id;
    std::vector<std::string> keys;
    bool csv = false;
    bool jsonl = false;
  };
  auto o = std::make_shared<options>();
  auto* s = app.add_subcommand("metrics", "every metric point of a job, one row per point "
                                          "(job, attempt, rank, step, time, key, value), for a "
                                          "plotting script");
  s->add_option("ID", o->id, "job id (full or a unique suffix)")->required();
  s->add_option("--key", o->keys, "only this metric (may be given several times)");
  auto* csv = s->add_flag("--csv", o->csv, "CSV with a header line");
  auto* jsonl = s->add_flag("--jsonl", o->jsonl, "one JSON object a line");
  csv->excludes(jsonl);
  return {s, [o](context& ctx) {
            auto format = o->csv     ? metric_format::csv
                          : o->jsonl ? metric_format::jsonl
                          : ctx.g.json ? metric_format::json
                                       : metric_format::table;
            return run_metrics(ctx, o->id, o->keys, format);
          }};
}

} // namespace monkey::cli
