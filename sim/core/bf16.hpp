// bf16 on the host: the upper 16 bits of an f32 (sign, 8 exponent bits, 7 mantissa bits).
//
//   to_bf16_bits(f)   round to nearest, ties to even: add 0x7fff + (bit 16 of f) to the f32 bits, keep the top half.
//                     Subnormals round the same way (bf16 keeps f32's exponent range); overflow goes to infinity;
//                     every NaN becomes 0x7fff, the canonical bf16 NaN that CUDA's __float2bfloat16_rn returns
//                     (CUDART_NAN_BF16 in cuda_bf16.hpp), so host and GPU conversions agree bit for bit.
//   from_bf16_bits(b) exact: the f32 whose upper half is b.
// Used wherever bf16 is made on the host: seeded inputs of bf16 runs, host I/O, the bf16 reduction.
#pragma once
#include <cstdint>

namespace cpsim {

inline constexpr std::uint16_t kBf16Nan = 0x7fff;

std::uint16_t to_bf16_bits(float f);
float from_bf16_bits(std::uint16_t b);

// x rounded to bf16 (through f32, as a bf16 buffer filled from doubles holds it) and widened back.
double round_to_bf16(double x);

}  // namespace cpsim
