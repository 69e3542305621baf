// bf16 on the host: round to nearest, ties to even, as the GPU's conversion does (no GPU needed).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "sim/cuda/cuda_api.hpp"

using namespace cpsim;

TEST_CASE("bf16 keeps 8 significant bits and rounds ties to even") {
  CHECK(to_bf16_bits(1.0) == 0x3f80);
  CHECK(to_bf16_bits(-2.0) == 0xc000);
  CHECK(from_bf16_bits(0x3f80) == 1.0);
  const double ulp = std::ldexp(1.0, -7);  // spacing of bf16 values in [1, 2)
  CHECK(round_to_bf16(1.0 + ulp) == 1.0 + ulp);
  CHECK(round_to_bf16(1.0 + ulp / 2) == 1.0);                // tie: 1.0 is even
  CHECK(round_to_bf16(1.0 + 3 * ulp / 2) == 1.0 + 2 * ulp);  // tie: 1 + 2 ulp is even
  CHECK(round_to_bf16(1.0 + ulp / 2 + 1e-6) == 1.0 + ulp);   // above the tie: up
  CHECK(round_to_bf16(0.1) == doctest::Approx(0.1).epsilon(1.0 / 256));
}

TEST_CASE("bf16 carries infinities and NaN, and overflows to infinity") {
  CHECK(std::isinf(round_to_bf16(-INFINITY)));
  CHECK(round_to_bf16(-INFINITY) < 0);
  CHECK(std::isnan(round_to_bf16(NAN)));
  CHECK(std::isinf(round_to_bf16(std::numeric_limits<float>::max())));
}
