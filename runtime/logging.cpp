// SPDX-License-Identifier: Apache-2.0
#include "runtime/logging.hpp"

#include <mutex>

#include <spdlog/cfg/env.h>
#include <spdlog/sinks/rotating_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace monkey {

namespace {

std::mutex mtx;
spdlog::sink_ptr sink;

spdlog::sink_ptr current_sink() {
  if (!sink)
    sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  return sink;
}

} // namespace

void init_logging(const std::string& file, size_t max_bytes, size_t files) {
  std::lock_guard<std::mutex> g{mtx};
  if (!file.empty())
    sink = std::make_shared<spdlog::sinks::rotating_file_sink_mt>(file, max_bytes, files);
  else
    sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  sink->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%n] %v");
  spdlog::flush_on(spdlog::level::info);
}

std::shared_ptr<spdlog::logger> logger(const std::string& area) {
  std::lock_guard<std::mutex> g{mtx};
  if (auto existing = spdlog::get(area))
    return existing;
  auto log = std::make_shared<spdlog::logger>(area, current_sink());
  log->set_level(spdlog::level::info);
  log->flush_on(spdlog::level::info);
  spdlog::register_logger(log);
  spdlog::cfg::load_env_levels();
  return log;
}

} // namespace monkey
