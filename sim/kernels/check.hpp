// The check: the one comparison of a result with the f64 reference, and its rules. `cpsim run`, `cpsim attention`,
// the lessons, the judge and the GPU tests all check through check_against_reference, print CheckRule::words and
// write it into their JSON as check.rule.
//
// Each tensor (out, lse, and dq, dk, dv for a backward) is compared element by element with the reference computed
// in double on the same inputs (inputs rounded to the result's dtype first, so the reference sees exactly what the
// device saw). An element e with reference value w passes when
//     |e - w| <= atol + rtol |w|
// and the rule says where atol and rtol come from:
//   f64 (CPU)         atol = 1e-10, rtol = 0.
//   f32 (CPU)         flash-attention's rule, per tensor, widened by the LSE merges a row goes through: rtol = 0,
//                       atol = 2 err(plain f32) + FLT_EPSILON (max|w| + 0.3) + m merge(w)
//                     err(x) = max |x - reference|; plain f32 = the textbook loops in float (plain.hpp) on the same
//                     inputs, computed here. The floor is about one f32 rounding at the reference's magnitude, counted
//                     from 0.3 as flash-attention's tests count theirs (hopper/test_flash_attn.py), so that a tensor
//                     the plain loops get exactly right (an all-zero gradient, say) does not demand an exact kernel.
//                     The plain loops are the one f32 baseline for every command: they are the definition written in
//                     f32, independent of the kernels being checked (a tiled kernel cannot be its own yardstick).
//                     m (AttentionProblem::merges) is the most LSE merges (merge.hpp) a row's result went through:
//                     the ring's C/A - 1 steps, none for all-gather and Ulysses. The plain loops make none, so each
//                     merge is rounding they cannot show; merge(w) bounds what one merge adds (u = FLT_EPSILON / 2,
//                     the unit roundoff; L = max|lse|, O = max|out|, G = max|w| of a gradient):
//                       lse  L' = hi + log1p(exp(lo - hi)): exp and log1p round a value below log 2 (<= 2u), the
//                            sum rounds at |L'| (<= u |L'|): |dL| <= u (|L| + 2) <= FLT_EPSILON (L + 1)
//                       out  o' = exp(a - L') o_a + exp(c - L') o_b: a weight's exponent carries dL and one rounding
//                            of a - L' (u |L|), exp one more (u): relative weight error <= FLT_EPSILON (L + 2); the
//                            two products and the sum round at O (<= 3u): |do| <= FLT_EPSILON O (L + 4)
//                       dq, dk, dv   the backward recomputes p = exp(s - L) from the merged lse, so each merge's dL
//                            scales them by up to FLT_EPSILON (L + 1) relative, and the ring sums one partial per
//                            step (one rounding at G): |dg| <= FLT_EPSILON G (L + 2)
//                     Errors of m merges add at most linearly (each merge rounds a value that carries the earlier
//                     errors unchanged), so m merge(w) bounds them. At C = 16 and L ~ 5 that is ~15 x 9 x FLT_EPSILON
//                     of a tensor's largest value, ~1.6e-5 relative: a dropped or doubled block moves a row by a
//                     sizeable fraction of its value and still fails.
//   bf16 (GPU)        atol = rtol = 2.5e-2, 3.5e-2 with grouped-query attention: Transformer Engine's context-parallel
//                     tests. bf16 keeps 8 significant bits (relative rounding 2^-9); p and ds are rounded to bf16
//                     before their products and out after every ring merge, so errors of a few tenths of a percent of
//                     the largest values are expected, and 2.5e-2 leaves room for C = 8 merges.
//   f32 (GPU)         atol = 1e-5, rtol = 1e-4: an f32 kernel's error stays near 1e-6 of the values at the checked
//                     sizes (sums over at most a few thousand terms); anything computed in bf16 by mistake fails.
// Equal infinities count as no error (a row that sees no key has lse -inf both ways); a NaN, or an infinity against
// anything else, fails.
//
// The f32 rule compares two maxima of rounding errors. On problems of a few dozen rows the plain loops can be luckier
// than half the kernel's error (seen at S = 2, D = 1 and at S = 33, D = 16) and the check fails although both are
// right to a few ulps; from a few hundred rows on, the maxima are steady and the kernels stay well inside.
#pragma once
#include <string>
#include <vector>

#include "sim/core/dtype.hpp"
#include "sim/core/json.hpp"
#include "sim/core/recorder.hpp"
#include "sim/kernels/reference.hpp"

namespace cpsim {

enum class RuleKind : std::uint8_t {
  absolute,     // atol fixed, rtol 0 (f64)
  plain_f32,    // atol per tensor from the plain f32 loops' error (f32 on the CPU)
  elementwise,  // atol + rtol |w| per element (GPU)
};

struct CheckRule {
  RuleKind kind = RuleKind::absolute;
  double atol = 0, rtol = 0;  // absolute and elementwise; plain_f32 computes atol per tensor
  std::string words;          // the rule in words, as every command prints it
};

inline constexpr double kF64Tolerance = 1e-10;
inline constexpr double kF32FloorOffset = 0.3;  // the f32 floor's magnitude offset (see above)

// The rule for results of `dtype` computed on a CPU device (gpu false) or a GPU; gqa: Nq != Nkv.
// UsageError for a dtype that device does not compute in (bf16 on the CPU, f64 on a GPU).
CheckRule check_rule(DType dtype, bool gpu, bool gqa);

// One number per tensor.
struct TensorErrors {
  double out = 0, lse = 0, dq = 0, dk = 0, dv = 0;
};

// Everything one check needs: the inputs (as doubles, already rounded to the result's dtype) and the problem.
struct AttentionProblem {
  std::vector<double> q, k, v, dout;  // [B, Sq, Nq, D], [B, Sk, Nkv, D] x2, [B, Sq, Nq, D] (dout may be empty)
  AttentionShape shape{};
  Positions q_pos, k_pos;
  Mask mask;  // causal unless given
  double scale = 0;
  // Rows left out of the comparison (document padding): query rows of out, lse, dq and key rows of dk, dv, given as
  // row indices of the problem (its positions when they are 0 .. S-1).
  std::vector<Span> padding;
  // The most LSE merges a row's result went through (the f32 rule's m): 0 for one kernel call.
  int merges = 0;
};

// A rank's verdict on the rows it owns: out, dq, dk, dv at its sequence positions, under the same rule.
struct RankVerdict {
  double err = 0;        // max |result - reference| on those rows
  bool correct = false;  // every element of them within the rule
};

struct CheckReport {
  bool ran = false;
  bool passed = false;
  bool backward = false;  // whether dq, dk, dv were checked
  RuleKind kind = RuleKind::absolute;
  std::string rule;                   // CheckRule::words
  TensorErrors err;                   // max |result - reference|
  TensorErrors allowed;               // the allowance at each tensor's largest reference value: atol + rtol max|w|
  TensorErrors baseline;              // plain_f32: the plain f32 loops' own max error (zeros for the other rules)
  TensorErrors worst;                 // max over elements of |e - w| / (atol + rtol |w|); a tensor passes when <= 1
  std::vector<RankVerdict> per_rank;  // when the owners' rows were given, in rank order
};

// Computes the reference (and for plain_f32 the baseline) on the problem and compares the result with it.
// got_b null: forward only (the problem's dout may then be empty). owners: per rank, the sequence positions it owns
// (for the per-rank verdicts); null: no per-rank verdicts.
CheckReport check_against_reference(const AttentionProblem& problem, const CheckRule& rule, const RefForward& got_f,
                                    const RefBackward* got_b = nullptr,
                                    const std::vector<std::vector<Span>>* owners = nullptr);

// The check as JSON, as every command writes it under "check": {passed, rule, max_abs_err, tolerance,
// [plain_f32_err,] per_rank: [{correct, max_abs_err}]}, each error object holding out, lse (and dq, dk, dv).
Json check_json(const CheckReport& c);

// One tensor under a rule of fixed bounds (absolute or elementwise; plain_f32 bounds come from the problem and
// throw Error here): the comparison check_against_reference makes of each tensor. For kernel tests of one call.
struct TensorCheck {
  double err = 0, allowed = 0, worst = 0;  // as in CheckReport
  bool passed = false;
};
TensorCheck check_tensor(const std::vector<double>& got, const std::vector<double>& want, const CheckRule& rule);
// One element under a rule of fixed bounds: |got - want| <= atol + rtol |want| (equal infinities pass, NaN fails).
bool within(double got, double want, const CheckRule& rule);

// max |got - want| over all elements. Equal infinities (two -inf LSEs) count as 0; a NaN, or an infinity against
// anything else, makes the result +inf. Throws Error when the sizes differ.
double max_abs_error(const std::vector<double>& got, const std::vector<double>& want);
// max |x| over the finite elements (0 when there are none).
double max_abs_finite(const std::vector<double>& x);

}  // namespace cpsim
