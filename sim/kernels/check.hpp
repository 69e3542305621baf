// Checking attention results against the f64 reference, with a tolerance that follows from a principle.
//
//   f64 runs: every max abs error <= 1e-10.
//   f32 runs (flash-attention's rule): err(result) <= 2 * err(plain f32) + floor, per tensor, where
//     err(x) = max |x - reference| and plain f32 is plain.hpp measured on the same inputs in the same run;
//     floor  = FLT_EPSILON * (max |reference| + 0.3): about one f32 rounding at the reference's magnitude, counted
//              from 0.3 as flash-attention's tests count theirs (2 * max |(ref + 0.3 - 0.3) - ref| in the tested
//              dtype; flash-attention, hopper/test_flash_attn.py), so that a tensor the plain loops get exactly right
//              (an all-zero gradient, say) does not demand an exact kernel.
//   The rule compares two maxima of rounding errors. On problems of a few dozen rows the plain loops can be luckier
//   than half the kernel's error (seen at S = 2, D = 1 and at S = 33, D = 16) and the check fails although both are
//   right to a few ulps; from a few hundred rows on, the maxima are steady and the kernel stays well inside.
// Used by `cpsim attention` and by the strategies' checks (which compare a whole context-parallel run).
#pragma once
#include <vector>

#include "sim/core/dtype.hpp"
#include "sim/kernels/reference.hpp"

namespace cpsim {

struct AttentionErrors {
  double out = 0, lse = 0, dq = 0, dk = 0, dv = 0;
};

// max |got - want| over all elements. Equal infinities (two -inf LSEs) count as 0; a NaN, or an infinity against
// anything else, makes the result +inf. Throws Error when the sizes differ.
double max_abs_error(const std::vector<double>& got, const std::vector<double>& want);
// max |x| over the finite elements (0 when there are none).
double max_abs_finite(const std::vector<double>& x);

// Everything one check needs: the inputs (as doubles; f32 runs pass float-representable values) and the problem.
struct AttentionProblem {
  std::vector<double> q, k, v, dout;  // [B, Sq, Nq, D], [B, Sk, Nkv, D] x2, [B, Sq, Nq, D] (dout may be empty)
  AttentionShape shape{};
  Positions q_pos, k_pos;
  bool causal = true;
  double scale = 0;
};

struct AttentionCheck {
  AttentionErrors err;      // the result's max abs errors against the reference
  AttentionErrors allowed;  // the tolerance per tensor
  AttentionErrors plain;    // f32 runs: the plain f32 baseline's errors (zeros for f64)
  bool backward = false;    // whether dq, dk, dv were checked
  bool passed = false;
};

// Computes the reference (and for f32 the plain baseline) on the problem and compares the result with it.
// got_b null: forward only (the problem's dout may then be empty).
// dtype is the result's precision: f32 or f64 (anything else throws UsageError).
AttentionCheck check_against_reference(const AttentionProblem& problem, DType dtype, const RefForward& got_f,
                                       const RefBackward* got_b = nullptr);

inline constexpr double kF64Tolerance = 1e-10;
inline constexpr double kF32FloorOffset = 0.3;  // the floor's magnitude offset (see above)

}  // namespace cpsim
