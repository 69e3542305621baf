#include "sim/comm/collectives/reduce.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>

namespace cpsim::collectives {

namespace {

template <class T>
void combine_as(T* out, const T* a, const T* b, std::size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      for (std::size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
      return;
    case ReduceOp::max:
      for (std::size_t i = 0; i < n; ++i) out[i] = std::max(a[i], b[i]);
      return;
    case ReduceOp::min:
      for (std::size_t i = 0; i < n; ++i) out[i] = std::min(a[i], b[i]);
      return;
  }
}

// bf16 is the high half of an f32.
float bf16_to_f32(std::uint16_t h) {
  return std::bit_cast<float>(std::uint32_t{h} << 16);
}
std::uint16_t f32_to_bf16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40);  // NaN stays NaN
  const std::uint32_t round = 0x7fffu + ((u >> 16) & 1u);                                    // to nearest even
  return static_cast<std::uint16_t>((u + round) >> 16);
}

void combine_bf16(std::uint16_t* out, const std::uint16_t* a, const std::uint16_t* b, std::size_t n, ReduceOp op) {
  for (std::size_t i = 0; i < n; ++i) {
    const float x = bf16_to_f32(a[i]), y = bf16_to_f32(b[i]);
    const float r = op == ReduceOp::sum ? x + y : op == ReduceOp::max ? std::max(x, y) : std::min(x, y);
    out[i] = f32_to_bf16(r);
  }
}

}  // namespace

void combine(void* out, const void* a, const void* b, std::size_t count, DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::f32:
      return combine_as(static_cast<float*>(out), static_cast<const float*>(a), static_cast<const float*>(b), count,
                        op);
    case DType::f64:
      return combine_as(static_cast<double*>(out), static_cast<const double*>(a), static_cast<const double*>(b), count,
                        op);
    case DType::i64:
      return combine_as(static_cast<std::int64_t*>(out), static_cast<const std::int64_t*>(a),
                        static_cast<const std::int64_t*>(b), count, op);
    case DType::bf16:
      return combine_bf16(static_cast<std::uint16_t*>(out), static_cast<const std::uint16_t*>(a),
                          static_cast<const std::uint16_t*>(b), count, op);
  }
}

}  // namespace cpsim::collectives
