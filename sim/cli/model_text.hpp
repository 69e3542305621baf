// Text helpers shared by the model's commands (`cpsim predict`, `cpsim plan`, `cpsim calibrate`).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/columns.hpp"

namespace cpsim::cli {

std::string size_label(std::int64_t n);                     // 16384 -> "16K", 1048576 -> "1M", 1000 -> "1000"
std::string fixed(double v, int decimals);                  // "%.*f"
std::string percent(double fraction);                       // 0.0312 -> "+3.1%"

}  // namespace cpsim::cli

