#include "sim/core/dtype.hpp"

#include "sim/core/bf16.hpp"
#include "sim/core/error.hpp"

namespace cpsim {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::bf16: return "bf16";
    case DType::i64: return "i64";
  }
  return "?";
}

DType parse_dtype(std::string_view s) {
  if (s == "f32") return DType::f32;
  if (s == "f64") return DType::f64;
  if (s == "bf16") return DType::bf16;
  throw UsageError("unknown dtype '" + std::string(s) + "'",
                   {Fix{{"--dtype f32, f64 or bf16"}, "the dtypes are f32, f64 and bf16"}});
}

double round_to_dtype(double x, DType t) {
  switch (t) {
    case DType::f32:
      return static_cast<float>(x);
    case DType::bf16:
      return round_to_bf16(x);
    case DType::f64:
    case DType::i64:
      break;
  }
  return x;
}

}  // namespace cpsim
