// bf16 on the host: round to nearest, ties to even, as the GPU's conversion does; one NaN; and rounding to a dtype.
#include "sim/core/bf16.hpp"

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "sim/core/dtype.hpp"

using namespace cpsim;

namespace {
float from_bits(std::uint32_t u) {
  return std::bit_cast<float>(u);
}
}  // namespace

TEST_CASE("bf16 keeps the top 16 bits of an f32 and rounds ties to even") {
  CHECK(to_bf16_bits(1.0f) == 0x3f80);
  CHECK(to_bf16_bits(-2.0f) == 0xc000);
  CHECK(from_bf16_bits(0x3f80) == 1.0f);
  // 1 + 2^-8 lies halfway between the bf16 neighbours 1 and 1 + 2^-7: the even one, 1, wins.
  CHECK(to_bf16_bits(from_bits(0x3f808000)) == 0x3f80);
  // 1 + 3 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): up.
  CHECK(to_bf16_bits(from_bits(0x3f818000)) == 0x3f82);
  // Just above and just below a tie.
  CHECK(to_bf16_bits(from_bits(0x3f808001)) == 0x3f81);
  CHECK(to_bf16_bits(from_bits(0x3f807fff)) == 0x3f80);
  const double ulp = std::ldexp(1.0, -7);  // spacing of bf16 values in [1, 2)
  CHECK(round_to_bf16(1.0 + ulp / 2) == 1.0);
  CHECK(round_to_bf16(1.0 + 3 * ulp / 2) == 1.0 + 2 * ulp);
  CHECK(round_to_bf16(0.1) == doctest::Approx(0.1).epsilon(1.0 / 256));
}

TEST_CASE("bf16 subnormals round the same way, and the smallest survive exactly") {
  CHECK(to_bf16_bits(from_bits(0x00010000)) == 0x0001);  // 2^-133, the smallest bf16 subnormal
  CHECK(from_bf16_bits(0x0001) == std::ldexp(1.0f, -133));
  CHECK(to_bf16_bits(from_bits(0x00008000)) == 0x0000);  // a tie between 0 and 2^-133: to the even 0
  CHECK(to_bf16_bits(from_bits(0x00018000)) == 0x0002);  // a tie between 1 and 2 units: to the even 2
  CHECK(to_bf16_bits(from_bits(0x80010000)) == 0x8001);  // the sign is kept
  CHECK(to_bf16_bits(from_bits(0x007fffff)) == 0x0080);  // the largest f32 subnormal rounds up to 2^-126
}

TEST_CASE("bf16 carries signed zeros and infinities, and overflows to infinity") {
  CHECK(to_bf16_bits(0.0f) == 0x0000);
  CHECK(to_bf16_bits(-0.0f) == 0x8000);
  CHECK(to_bf16_bits(std::numeric_limits<float>::infinity()) == 0x7f80);
  CHECK(to_bf16_bits(-std::numeric_limits<float>::infinity()) == 0xff80);
  CHECK(to_bf16_bits(std::numeric_limits<float>::max()) == 0x7f80);  // rounds past the largest bf16
  CHECK(to_bf16_bits(from_bits(0x7f7f7fff)) == 0x7f7f);              // the largest bf16 itself stays
}

TEST_CASE("every NaN becomes the canonical bf16 NaN 0x7fff, never an infinity") {
  CHECK(to_bf16_bits(std::numeric_limits<float>::quiet_NaN()) == kBf16Nan);
  CHECK(to_bf16_bits(from_bits(0xffc00000)) == kBf16Nan);  // a negative NaN
  CHECK(to_bf16_bits(from_bits(0x7f800001)) == kBf16Nan);  // a NaN whose payload sits below bf16's bits
  CHECK(to_bf16_bits(from_bits(0x7fffffff)) == kBf16Nan);  // a NaN that would carry into the sign bit
  CHECK(std::isnan(from_bf16_bits(kBf16Nan)));
  CHECK(std::isnan(round_to_bf16(NAN)));
}

TEST_CASE("rounding to a dtype gives what a buffer of that dtype holds") {
  CHECK(round_to_dtype(0.1, DType::f64) == 0.1);
  CHECK(round_to_dtype(0.1, DType::f32) == static_cast<double>(0.1f));
  CHECK(round_to_dtype(0.5, DType::f32) == 0.5);
  CHECK(round_to_dtype(1e-50, DType::f32) == 0.0);
  CHECK(round_to_dtype(0.1, DType::bf16) == round_to_bf16(0.1));
  CHECK(round_to_dtype(0.1, DType::bf16) != static_cast<double>(0.1f));
}
