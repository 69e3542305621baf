#include "sim/core/bf16.hpp"

#include <bit>

namespace cpsim {

std::uint16_t to_bf16_bits(float f) {
  const auto u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return kBf16Nan;  // exponent all ones, mantissa not zero
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float from_bf16_bits(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

double round_to_bf16(double x) {
  return from_bf16_bits(to_bf16_bits(static_cast<float>(x)));
}

}  // namespace cpsim
