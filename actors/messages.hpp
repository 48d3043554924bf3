// SPDX-License-Identifier: Apache-2.0
#pragma once
// In-process message types between Monkey's actors. They never cross the network (only
// runtime/wire/envelope.hpp does), so they are allowed as unsafe (unserializable) types.

#include <caf/allowed_unsafe_message_type.hpp>

#include "runtime/job.hpp"
#include "runtime/journal/journal.hpp"
#include "runtime/process/launcher.hpp"
#include "runtime/membership.hpp"

namespace monkey {

/// How an attempt ended, as the worker saw it.
struct attempt_result {
  std::string outcome; ///< succeeded, failed, timeout, cancelled, requeued
  std::string cause;
  exit_info exit;
};

using metric_batch = std::vector<metric_point>;
using record_list = std::vector<job_record>;
using metric_map = std::map<std::string, double>;
using task_state_list = std::vector<journal::task_state>;
using id_list = std::vector<job_id>;
using member_list = std::vector<member>;
using metric_stats_map = std::map<std::string, metric_stats>;
using metrics_by_job = std::map<job_id, metric_stats_map>;

} // namespace monkey

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(monkey::write_batch)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(monkey::metric_batch)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(monkey::record_list)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(monkey::metric_map)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(monkey::launch_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(monkey::exit_info)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(monkey::attempt_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(monkey::job_id)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(monkey::task_chunk)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(monkey::chunk_result)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(monkey::task_state_list)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(monkey::id_list)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(monkey::member_list)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(monkey::metric_stats_map)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(monkey::metrics_by_job)
