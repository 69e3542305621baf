#include "sim/comm/collectives/reduce.hpp"

#include <algorithm>
#include <cstdint>

#include "sim/core/bf16.hpp"

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

void combine_bf16(std::uint16_t* out, const std::uint16_t* a, const std::uint16_t* b, std::size_t n, ReduceOp op) {
  for (std::size_t i = 0; i < n; ++i) {
    const float x = from_bf16_bits(a[i]), y = from_bf16_bits(b[i]);
    const float r = op == ReduceOp::sum ? x + y : op == ReduceOp::max ? std::max(x, y) : std::min(x, y);
    out[i] = to_bf16_bits(r);
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
