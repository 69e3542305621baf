#include "sim/cli/model_text.hpp"

#include <cstdio>

namespace cpsim::cli {

std::string size_label(std::int64_t n) {
  if (n > 0 && n % (1 << 20) == 0) return std::to_string(n >> 20) + "M";
  if (n > 0 && n % (1 << 10) == 0) return std::to_string(n >> 10) + "K";
  return std::to_string(n);
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}


std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", fraction * 100);
  return buf;
}

}  // namespace cpsim::cli
