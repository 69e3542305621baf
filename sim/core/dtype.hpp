// Element types a buffer can hold. CPU devices compute in f32 and f64; bf16 is for GPU devices.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace cpsim {

enum class DType : std::uint8_t { f32, f64, bf16, i64 };

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::bf16: return 2;
    case DType::i64: return 8;
  }
  return 0;
}

std::string_view dtype_name(DType t);
// Parses "f32" | "f64" | "bf16"; throws UsageError naming the accepted values otherwise.
DType parse_dtype(std::string_view s);

// x as a buffer of dtype t holds it: f32 and bf16 round to nearest even (bf16 through f32, sim/core/bf16.hpp),
// f64 (and i64) keep it.
double round_to_dtype(double x, DType t);

}  // namespace cpsim
