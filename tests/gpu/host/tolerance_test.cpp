// The GPU check's tolerance rule and its element-by-element comparison (no GPU needed).
#include <doctest/doctest.h>

#include <cmath>

#include "sim/core/error.hpp"
#include "sim/cuda/cuda_api.hpp"

using namespace cpsim;

TEST_CASE("bf16 runs use Transformer Engine's tolerances, wider with GQA; f32 runs a tight one") {
  CHECK(gpu_tolerance(DType::bf16, false).atol == 2.5e-2);
  CHECK(gpu_tolerance(DType::bf16, false).rtol == 2.5e-2);
  CHECK(gpu_tolerance(DType::bf16, true).atol == 3.5e-2);
  CHECK(gpu_tolerance(DType::bf16, true).rtol == 3.5e-2);
  CHECK(gpu_tolerance(DType::f32, true).atol == 1e-5);
  CHECK(gpu_tolerance(DType::f32, false).rtol == 1e-4);
  CHECK_THROWS_AS(gpu_tolerance(DType::f64, false), UsageError);
}

TEST_CASE("check_close allows atol + rtol |reference| per element, and no more") {
  const GpuTolerance tol{0.1, 0.01, "test"};
  CHECK(check_close({1.0, 10.2}, {1.0, 10.0}, tol).passed);  // 0.2 <= 0.1 + 0.1
  CHECK_FALSE(check_close({1.0, 10.25}, {1.0, 10.0}, tol).passed);
  CHECK_FALSE(check_close({0.15}, {0.0}, tol).passed);  // near zero only atol counts
  const CloseCheck c = check_close({1.0, 10.2}, {1.0, 10.0}, tol);
  CHECK(c.max_abs_error == doctest::Approx(0.2));
  CHECK(c.allowed == doctest::Approx(0.2));
  CHECK(c.worst_ratio == doctest::Approx(1.0));
}

TEST_CASE("check_close accepts matching -inf (rows that see no key) and refuses NaN or a lone infinity") {
  const GpuTolerance tol = gpu_tolerance(DType::bf16, false);
  CHECK(check_close({-INFINITY, 1.0}, {-INFINITY, 1.0}, tol).passed);
  CHECK_FALSE(check_close({-INFINITY}, {3.0}, tol).passed);
  CHECK_FALSE(check_close({0.0}, {-INFINITY}, tol).passed);
  CHECK_FALSE(check_close({NAN}, {1.0}, tol).passed);
  CHECK_THROWS_AS(check_close({1.0}, {1.0, 2.0}, tol), Error);
}
