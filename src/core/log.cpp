#include "core/log.h"

#include <atomic>
#include <mutex>

namespace imp::log {
namespace {
std::atomic<Level> g_level{Level::kInfo};
std::mutex g_mutex;
}  // namespace

Level level() { return g_level.load(std::memory_order_relaxed); }
void set_level(Level level) { g_level.store(level, std::memory_order_relaxed); }

void write(Level level, const std::string& message) {
  static constexpr const char* kNames[] = {"debug", "info", "warn", "error"};
  std::lock_guard lock(g_mutex);
  fmt::print(stderr, "imp {}: {}\n", kNames[static_cast<int>(level)], message);
}

}  // namespace imp::log
