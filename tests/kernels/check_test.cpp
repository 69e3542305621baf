// The check's rules on fixed inputs: which rule a dtype and device get, what each allows, and a case each must reject.
#include "sim/kernels/check.hpp"

#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <limits>

#include "sim/core/error.hpp"
#include "sim/core/json.hpp"
#include "sim/kernels/plain.hpp"
#include "sim/runtime/inputs.hpp"

using namespace cpsim;

namespace {
const double kInf = std::numeric_limits<double>::infinity();

struct Exact {  // the reference's own results for a problem: a result with zero error
  AttentionProblem p;
  RefForward f;
  RefBackward b;
};
Exact exact(DType dtype, std::int64_t S = 24) {
  const AttentionShape sh{.B = 1, .Sq = S, .Sk = S, .Nq = 2, .Nkv = 1, .D = 8};
  Exact e{attention_problem(sh, true, dtype, 8), {}, {}};
  e.f = reference_forward(e.p.q, e.p.k, e.p.v, sh, e.p.q_pos, e.p.k_pos, true);
  e.b = reference_backward(e.p.q, e.p.k, e.p.v, e.p.dout, sh, e.p.q_pos, e.p.k_pos, true);
  return e;
}
}  // namespace

TEST_CASE("each dtype and device gets its rule, and a dtype the device does not compute in is refused") {
  const CheckRule f64 = check_rule(DType::f64, false, false);
  CHECK(f64.kind == RuleKind::absolute);
  CHECK(f64.atol == kF64Tolerance);
  CHECK(f64.rtol == 0);
  CHECK(f64.words == "f64: every max abs error <= 1e-10");
  CHECK(check_rule(DType::f32, false, true).kind == RuleKind::plain_f32);
  const CheckRule bf16 = check_rule(DType::bf16, true, false), bf16_gqa = check_rule(DType::bf16, true, true);
  CHECK(bf16.kind == RuleKind::elementwise);
  CHECK(bf16.atol == 2.5e-2);
  CHECK(bf16.rtol == 2.5e-2);
  CHECK(bf16_gqa.atol == 3.5e-2);
  CHECK(bf16_gqa.rtol == 3.5e-2);
  const CheckRule gpu_f32 = check_rule(DType::f32, true, false);
  CHECK(gpu_f32.atol == 1e-5);
  CHECK(gpu_f32.rtol == 1e-4);
  CHECK_THROWS_WITH_AS(check_rule(DType::bf16, false, false), doctest::Contains("f32 or f64"), UsageError);
  CHECK_THROWS_WITH_AS(check_rule(DType::f64, true, false), doctest::Contains("bf16 or f32"), UsageError);
}

TEST_CASE("max abs error counts two equal infinities as no error and a NaN or a lone infinity as infinite") {
  CHECK(max_abs_error({-kInf, 1.0}, {-kInf, 1.5}) == 0.5);
  CHECK(max_abs_error({-kInf}, {0.0}) == kInf);
  CHECK(max_abs_error({std::nan("")}, {0.0}) == kInf);
  CHECK_THROWS_AS(max_abs_error({1.0}, {1.0, 2.0}), Error);
  CHECK(max_abs_finite({-kInf, -3.0, 2.0}) == 3.0);
}

TEST_CASE("the reference's own results pass every rule") {
  for (DType t : {DType::f64, DType::f32}) {
    const Exact e = exact(t);
    const CheckReport c = check_against_reference(e.p, check_rule(t, false, true), e.f, &e.b);
    CHECK(c.ran);
    CHECK(c.passed);
    CHECK(c.err.out == 0);
    CHECK(c.err.dv == 0);
  }
  const Exact e = exact(DType::bf16);
  CHECK(check_against_reference(e.p, check_rule(DType::bf16, true, true), e.f, &e.b).passed);
}

TEST_CASE("the f64 rule rejects a result off by 1e-9 in one gradient") {
  Exact e = exact(DType::f64);
  e.b.dk[5] += 1e-9;
  const CheckReport c = check_against_reference(e.p, check_rule(DType::f64, false, true), e.f, &e.b);
  CHECK_FALSE(c.passed);
  CHECK(c.err.dk == doctest::Approx(1e-9).epsilon(1e-3));
  CHECK(c.worst.dk > 1);
  CHECK(c.err.dq == 0);
  CHECK(c.worst.dq == 0);
}

TEST_CASE("the f32 allowance is twice the plain f32 error plus one f32 rounding at the reference's magnitude") {
  Exact e = exact(DType::f32);
  const CheckRule rule = check_rule(DType::f32, false, true);
  const CheckReport c = check_against_reference(e.p, rule, e.f, &e.b);
  const auto pf = plain_forward_f32(e.p.q, e.p.k, e.p.v, e.p.shape, e.p.q_pos, e.p.k_pos, true);
  const double plain_out = max_abs_error(pf.out, e.f.out);
  CHECK(plain_out > 0);
  CHECK(c.baseline.out == plain_out);
  CHECK(c.allowed.out == 2 * plain_out + FLT_EPSILON * (max_abs_finite(e.f.out) + 0.3));
  // A result just outside the allowance is rejected; just inside passes.
  e.f.out[3] += 1.01 * c.allowed.out;
  CHECK_FALSE(check_against_reference(e.p, rule, e.f, &e.b).passed);
  e.f.out[3] -= 0.02 * c.allowed.out;
  CHECK(check_against_reference(e.p, rule, e.f, &e.b).passed);
}

TEST_CASE("the GPU rule allows atol + rtol |reference| per element, and no more") {
  const CheckRule rule{RuleKind::elementwise, 0.1, 0.01, "test"};
  CHECK(check_tensor({1.0, 10.2}, {1.0, 10.0}, rule).passed);  // 0.2 <= 0.1 + 0.1
  CHECK_FALSE(check_tensor({1.0, 10.25}, {1.0, 10.0}, rule).passed);
  CHECK_FALSE(check_tensor({0.15}, {0.0}, rule).passed);  // near zero only atol counts
  const TensorCheck c = check_tensor({1.0, 10.2}, {1.0, 10.0}, rule);
  CHECK(c.err == doctest::Approx(0.2));
  CHECK(c.allowed == doctest::Approx(0.2));
  CHECK(c.worst == doctest::Approx(1.0));
  CHECK(within(10.2, 10.0, rule));
  CHECK_FALSE(within(10.25, 10.0, rule));
  CHECK_THROWS_AS(check_tensor({1.0}, {1.0}, check_rule(DType::f32, false, false)), Error);
  // On a whole problem: one output element 3% off is too much for bf16's 2.5e-2 + 2.5e-2 |w|.
  Exact e = exact(DType::bf16);
  e.f.out[7] += 0.03 * std::abs(e.f.out[7]) + 0.03;
  const CheckReport bad = check_against_reference(e.p, check_rule(DType::bf16, true, false), e.f, &e.b);
  CHECK_FALSE(bad.passed);
  CHECK(bad.worst.out > 1);
  CHECK(bad.worst.lse <= 1);
}

TEST_CASE("every rule accepts matching infinities and rejects NaN or a lone infinity") {
  for (const CheckRule& rule : {check_rule(DType::f64, false, false), check_rule(DType::bf16, true, false)}) {
    CAPTURE(rule.words);
    CHECK(check_tensor({-kInf, 1.0}, {-kInf, 1.0}, rule).passed);
    CHECK_FALSE(check_tensor({-kInf}, {3.0}, rule).passed);
    CHECK_FALSE(check_tensor({0.0}, {-kInf}, rule).passed);
    CHECK_FALSE(check_tensor({std::nan("")}, {1.0}, rule).passed);
    CHECK(check_tensor({std::nan("")}, {1.0}, rule).err == kInf);
    CHECK_THROWS_AS(check_tensor({1.0}, {1.0, 2.0}, rule), Error);
  }
}

TEST_CASE("a forward-only check ignores the gradients and says so") {
  const Exact e = exact(DType::f64);
  const CheckReport c = check_against_reference(e.p, check_rule(DType::f64, false, true), e.f);
  CHECK_FALSE(c.backward);
  CHECK(c.passed);
}

TEST_CASE("per-rank verdicts judge each rank's own rows, and name the rank whose rows are wrong") {
  Exact e = exact(DType::f64, 32);
  // Rank r of 4 owns positions [8r, 8r + 8); one element of dv at position 20 (rank 2's) is off.
  const std::vector<std::vector<Span>> owners{{{0, 8}}, {{8, 16}}, {{16, 24}}, {{24, 32}}};
  e.b.dv[static_cast<std::size_t>(20 * e.p.shape.Nkv * e.p.shape.D + 3)] += 1e-6;
  const CheckReport c = check_against_reference(e.p, check_rule(DType::f64, false, true), e.f, &e.b, &owners);
  CHECK_FALSE(c.passed);
  REQUIRE(c.per_rank.size() == 4);
  for (int r : {0, 1, 3}) {
    CHECK(c.per_rank[static_cast<std::size_t>(r)].correct);
    CHECK(c.per_rank[static_cast<std::size_t>(r)].err == 0);
  }
  CHECK_FALSE(c.per_rank[2].correct);
  CHECK(c.per_rank[2].err == doctest::Approx(1e-6));
}

TEST_CASE("the check's JSON states the rule in words, its errors, allowances and per-rank verdicts") {
  const Exact e = exact(DType::f32);
  const std::vector<std::vector<Span>> owners{{{0, 12}}, {{12, 24}}};
  const CheckReport c = check_against_reference(e.p, check_rule(DType::f32, false, true), e.f, &e.b, &owners);
  const std::string s = json_text(check_json(c));
  CHECK(s.find("\"rule\":\"" + c.rule + "\"") != std::string::npos);
  for (const char* key : {"\"passed\":true", "\"max_abs_err\"", "\"tolerance\"", "\"plain_f32_err\"", "\"dv\"",
                          "\"per_rank\":[{\"correct\":true"})
    CHECK(s.find(key) != std::string::npos);
}
