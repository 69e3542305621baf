// bf16 on the host: the upper 16 bits of an f32 (sign, 8 exponent bits, 7 mantissa bits).
//
//   to_bf16_bits(f)   round to nearest, ties to even: add 0x7fff + (bit 16 of f) to the f32 bits, keep the top half.
//                     Subnormals round the same way (bf16 keeps f32's exponent range); overflow goes to infinity;
//                     every NaN becomes 0x7fff, the canonical bf16 NaN that CUDA's __float2bfloat16_rn returns
//                     (CUDART_NAN_BF16 in cuda_bf16.hpp), so host and GPU conversions agree bit for bit.
//   from_bf16_bits(b) exact: the f32 whose upper half is b.
// Used wherever bf16 is made on the host: seeded inputs of bf16 runs, host I/O, the bf16 reduction.
// Inline, so that loops of them vectorise (the seeded inputs' rounding: sim/core/random.cpp).
#pragma once
#include <bit>
#include <cstdint>

namespace cpsim {

inline constexpr std::uint16_t kBf16Nan = 0x7fff;

// f rounded to bf16, as the bits of an f32 (the lower half zero); in 32-bit operations and selects of constants,
// which vectorise.
inline std::uint32_t bf16_rounded_bits(float f) {
  const auto u = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t nan = (u & 0x7fffffffu) > 0x7f800000u ? ~0u : 0u;  // exponent all ones, mantissa not zero
  const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  return (rounded & ~nan) | ((std::uint32_t{kBf16Nan} << 16) & nan);
}

inline std::uint16_t to_bf16_bits(float f) {
  return static_cast<std::uint16_t>(bf16_rounded_bits(f) >> 16);
}

inline float from_bf16_bits(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

// x rounded to bf16 (through f32, as a bf16 buffer filled from doubles holds it) and widened back.
inline double round_to_bf16(double x) {
  return std::bit_cast<float>(bf16_rounded_bits(static_cast<float>(x)));
}

}  // namespace cpsim
