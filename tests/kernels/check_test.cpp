// The tolerance rule: f64 within 1e-10; f32 within twice the plain f32 error plus the rounding of the reference.
#include "sim/kernels/check.hpp"

#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <limits>

#include "sim/core/error.hpp"
#include "sim/kernels/plain.hpp"
#include "sim/kernels/single_run.hpp"

using namespace cpsim;

namespace {
const double kInf = std::numeric_limits<double>::infinity();

struct Exact {  // the reference's own results for a problem: a result with zero error
  AttentionProblem p;
  RefForward f;
  RefBackward b;
};
Exact exact(DType dtype) {
  const AttentionShape sh{.B = 1, .Sq = 24, .Sk = 24, .Nq = 2, .Nkv = 1, .D = 8};
  Exact e{random_problem(sh, true, dtype, 8), {}, {}};
  e.f = reference_forward(e.p.q, e.p.k, e.p.v, sh, e.p.q_pos, e.p.k_pos, true);
  e.b = reference_backward(e.p.q, e.p.k, e.p.v, e.p.dout, sh, e.p.q_pos, e.p.k_pos, true);
  return e;
}
}  // namespace

TEST_CASE("max abs error counts two equal infinities as no error and a NaN or a lone infinity as infinite") {
  CHECK(max_abs_error({-kInf, 1.0}, {-kInf, 1.5}) == 0.5);
  CHECK(max_abs_error({-kInf}, {0.0}) == kInf);
  CHECK(max_abs_error({std::nan("")}, {0.0}) == kInf);
  CHECK_THROWS_AS(max_abs_error({1.0}, {1.0, 2.0}), Error);
  CHECK(max_abs_finite({-kInf, -3.0, 2.0}) == 3.0);
}

TEST_CASE("the reference's own results pass the check in f64 and f32") {
  for (DType t : {DType::f64, DType::f32}) {
    const Exact e = exact(t);
    const auto c = check_against_reference(e.p, t, e.f, &e.b);
    CHECK(c.passed);
    CHECK(c.err.out == 0);
    CHECK(c.err.dv == 0);
  }
}

TEST_CASE("an f64 result off by 1e-9 in one gradient fails the check") {
  Exact e = exact(DType::f64);
  e.b.dk[5] += 1e-9;
  const auto c = check_against_reference(e.p, DType::f64, e.f, &e.b);
  CHECK_FALSE(c.passed);
  CHECK(c.err.dk == doctest::Approx(1e-9).epsilon(1e-3));
  CHECK(c.err.dq == 0);
}

TEST_CASE("the f32 allowance is twice the plain f32 error plus one f32 rounding at the reference's magnitude") {
  Exact e = exact(DType::f32);
  const auto c = check_against_reference(e.p, DType::f32, e.f, &e.b);
  const auto pf = plain_forward_f32(e.p.q, e.p.k, e.p.v, e.p.shape, e.p.q_pos, e.p.k_pos, true);
  const double plain_out = max_abs_error(pf.out, e.f.out);
  CHECK(c.plain.out == plain_out);
  CHECK(c.allowed.out == 2 * plain_out + FLT_EPSILON * (max_abs_finite(e.f.out) + 0.3));
  // A result just outside the allowance fails; just inside passes.
  e.f.out[3] += 1.01 * c.allowed.out;
  CHECK_FALSE(check_against_reference(e.p, DType::f32, e.f, &e.b).passed);
  e.f.out[3] -= 0.02 * c.allowed.out;
  CHECK(check_against_reference(e.p, DType::f32, e.f, &e.b).passed);
}

TEST_CASE("a forward-only check ignores the gradients and says so") {
  const Exact e = exact(DType::f64);
  const auto c = check_against_reference(e.p, DType::f64, e.f);
  CHECK_FALSE(c.backward);
  CHECK(c.passed);
}

TEST_CASE("checking a bf16 result is refused with a usage error") {
  const Exact e = exact(DType::f64);
  CHECK_THROWS_WITH_AS(check_against_reference(e.p, DType::bf16, e.f), doctest::Contains("f32 or f64"), UsageError);
}
