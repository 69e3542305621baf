#include "sim/os/host_cache.hpp"

#include <unistd.h>

#include <fstream>
#include <string>

namespace cpsim {

namespace {

// "32768K" -> 33554432; "1M" -> 1048576; nullopt when it is not such a size.
std::optional<std::size_t> sysfs_size(const std::string& text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) return std::nullopt;
  std::size_t bytes = std::stoull(text.substr(0, digits));
  const std::string unit = text.substr(digits);
  if (unit == "K")
    bytes <<= 10;
  else if (unit == "M")
    bytes <<= 20;
  else if (!unit.empty())
    return std::nullopt;
  return bytes;
}

}  // namespace

std::optional<std::size_t> last_level_cache_bytes() {
  // 1. The kernel's view: every cache of cpu 0; the highest level's largest data or unified one.
  const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index";
  int best_level = 0;
  std::size_t best = 0;
  for (int i = 0; i < 16; ++i) {
    std::ifstream level_f(dir + std::to_string(i) + "/level"), type_f(dir + std::to_string(i) + "/type"),
        size_f(dir + std::to_string(i) + "/size");
    int level = 0;
    std::string type, size;
    if (!(level_f >> level) || !(type_f >> type) || !(size_f >> size)) continue;
    if (type == "Instruction") continue;
    const auto bytes = sysfs_size(size);
    if (!bytes || *bytes == 0) continue;
    if (level > best_level || (level == best_level && *bytes > best)) {
      best_level = level;
      best = *bytes;
    }
  }
  if (best > 0) return best;
  // 2. The C library's view.
  for (const int name : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    const long bytes = sysconf(name);
    if (bytes > 0) return static_cast<std::size_t>(bytes);
  }
  return std::nullopt;
}

}  // namespace cpsim
