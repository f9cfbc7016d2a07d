// Minimal leveled logging to stderr. Auto-decisions are logged once at info level with their numbers.
#pragma once

#include <fmt/format.h>

#include <cstdio>

namespace imp::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kQuiet = 4 };

Level level();
void set_level(Level level);
void write(Level level, const std::string& message);

template <typename... Args>
void info(fmt::format_string<Args...> format, Args&&... args) {
  if (level() <= Level::kInfo) write(Level::kInfo, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> format, Args&&... args) {
  if (level() <= Level::kWarn) write(Level::kWarn, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
void debug(fmt::format_string<Args...> format, Args&&... args) {
  if (level() <= Level::kDebug) write(Level::kDebug, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace imp::log
