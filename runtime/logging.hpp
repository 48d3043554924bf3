// SPDX-License-Identifier: Apache-2.0
#pragma once
// One named spdlog logger per area. Levels come from SPDLOG_LEVEL (e.g.
// SPDLOG_LEVEL=info,journal=debug). Keep the returned pointer; do not look loggers up
// per message.

#include <cstddef>
#include <memory>
#include <string>

#include <spdlog/logger.h>
#include <spdlog/spdlog.h> // SPDLOG_LOGGER_DEBUG

namespace monkey {

/// Sets up logging once: to `file` when given (daemons), else to stderr. The file is
/// rotated: at `max_bytes` NAME.EXT becomes NAME.1.EXT (which becomes NAME.2.EXT, ...),
/// and at most `files` old ones are kept.
void init_logging(const std::string& file, size_t max_bytes = 64u << 20, size_t files = 5);

/// The logger of an area ("coordinator", "journal", "launcher", "devices", "gateway", ...).
std::shared_ptr<spdlog::logger> logger(const std::string& area);

} // namespace monkey
