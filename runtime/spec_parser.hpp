// SPDX-License-Identifier: Apache-2.0
#pragma once
// Job specs from YAML or JSON files (JSON is read as YAML) and from CLI values. Every
// problem is reported as `file:line:col: field: problem`.

#include <string>
#include <vector>

#include "runtime/expected.hpp"
#include "runtime/job.hpp"

namespace monkey {

/// What a spec file asks to ship (docs/shipping.md): keys `ship: true` (the working
/// directory) and `data: [PATH, ...]`. The client packs and stores them before it submits.
struct ship_intent {
  bool workdir = false;
  std::vector<std::string> data;
};

/// Parses a spec document; `origin` names it in errors (usually the file path). `ship`
/// receives the shipping keys (ignored when null).
expected<job_spec> parse_spec_text(const std::string& text, const std::string& origin,
                                   ship_intent* ship = nullptr);

/// Reads and parses a spec file.
expected<job_spec> parse_spec_file(const std::string& path, ship_intent* ship = nullptr);

/// "512", "512M", "4G", "1.5G" → megabytes.
expected<int64_t> parse_memory_mb(const std::string& text);

/// "90", "90s", "10m", "2h", "1d", "1.5h" → seconds.
expected<double> parse_duration_s(const std::string& text);

/// A retry backoff: "1s..1m" (the first wait, doubled up to the second), "5s" (5 s doubled
/// up to 1 min, or 5 s when larger) or "0" (retry at once) → {first, most} in seconds.
expected<std::pair<double, double>> parse_backoff(const std::string& text);

/// "ok:ID" / "any:ID" / "ID" (means ok) → a dependency; ids must be full 26-char ULIDs.
expected<dependency> parse_dependency(const std::string& text);

} // namespace monkey
