// SPDX-License-Identifier: Apache-2.0
#pragma once
// Placement on one node: strict priority, first-come-first-served within a priority, and
// EASY backfill (the first job that does not fit gets a reservation; a later job may start
// only if its timeout, or else its time estimate, ends before that reservation can start;
// queued_job::timeout_s carries that bound). A pure function, so every
// decision and every "why" is unit-tested. Plain C++.

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "runtime/ids.hpp"

namespace monkey {

struct resources {
  int32_t cpus = 0;
  int64_t mem_mb = 0;
  int32_t gpus = 0;
  int64_t gpu_mem_mb = 0; ///< per GPU (capacity on a node, demand on a job)
  std::vector<std::string> tags;
};

constexpr int64_t no_end = std::numeric_limits<int64_t>::max();

struct running_job {
  job_id id;
  resources use;
  int64_t end_ms = no_end; ///< start + timeout; no_end without a timeout
};

struct queued_job {
  job_id id;
  std::string label; ///< short id for messages
  int32_t priority = 0;
  uint64_t submit_seq = 0;
  resources need;
  double timeout_s = 0;
  std::string blocked; ///< non-empty: not eligible, and why (e.g. "waits for job X")
};

struct placement_plan {
  std::vector<job_id> start;          ///< in start order
  std::map<job_id, std::string> why;  ///< every queued job that does not start
  job_id reserved;                    ///< the job holding the reservation, if any
  int64_t reservation_ms = no_end;    ///< when it can start (no_end: unknown)
};

/// "needs 2 gpus; this node has 0" when the job can never fit `total`, else "".
std::string never_fits(const resources& total, const resources& need);

/// Decides which queued jobs start now. With `explain` unset no "why" text is built (the
/// hot path); the decisions are the same either way.
placement_plan plan_placement(const resources& total, const std::vector<running_job>& running,
                              std::vector<queued_job> queue, int64_t now_ms,
                              bool explain = true);

/// Reservation requests from other owners, judged together with this node's own queue by
/// the same rules (priority first, then order of arrival, backfill): the ids among
/// `requests` that would start now. A request of higher priority wins over an earlier one
/// and over this node's own lower-priority jobs; own jobs of equal priority go first.
std::vector<job_id> grant_reservations(const resources& total,
                                       const std::vector<running_job>& running,
                                       std::vector<queued_job> own_queue,
                                       std::vector<queued_job> requests, int64_t now_ms);

} // namespace monkey
