#include "sim/kernels/check.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>

#include "sim/core/error.hpp"
#include "sim/kernels/plain.hpp"

namespace cpsim {

double max_abs_error(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size())
    throw Error("cannot compare results of " + std::to_string(got.size()) + " and " + std::to_string(want.size()) +
                " values");
  double m = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double a = got[i], b = want[i];
    if (std::isinf(a) && a == b) continue;  // both -inf (a row that sees no key), or both +inf
    const double e = std::abs(a - b);       // NaN when either is NaN
    if (std::isnan(e)) return INFINITY;
    m = std::max(m, e);
  }
  return m;
}

double max_abs_finite(const std::vector<double>& x) {
  double m = 0;
  for (double e : x)
    if (std::isfinite(e)) m = std::max(m, std::abs(e));
  return m;
}

namespace {
bool within(const AttentionErrors& e, const AttentionErrors& a) {
  return e.out <= a.out && e.lse <= a.lse && e.dq <= a.dq && e.dk <= a.dk && e.dv <= a.dv;
}
}  // namespace

AttentionCheck check_against_reference(const AttentionProblem& p, DType dtype, const RefForward& got_f,
                                       const RefBackward* got_b) {
  require(dtype == DType::f32 || dtype == DType::f64,
          "results can be checked in f32 or f64 only (got " + std::string(dtype_name(dtype)) + ")",
          "use --dtype f32 or f64");
  AttentionCheck c;
  c.backward = got_b != nullptr;
  const RefForward ref_f = reference_forward(p.q, p.k, p.v, p.shape, p.q_pos, p.k_pos, p.causal, p.scale);
  c.err.out = max_abs_error(got_f.out, ref_f.out);
  c.err.lse = max_abs_error(got_f.lse, ref_f.lse);
  RefBackward ref_b;
  if (c.backward) {
    ref_b = reference_backward(p.q, p.k, p.v, p.dout, p.shape, p.q_pos, p.k_pos, p.causal, p.scale);
    c.err.dq = max_abs_error(got_b->dq, ref_b.dq);
    c.err.dk = max_abs_error(got_b->dk, ref_b.dk);
    c.err.dv = max_abs_error(got_b->dv, ref_b.dv);
  }
  if (dtype == DType::f64) {
    c.allowed = {kF64Tolerance, kF64Tolerance, kF64Tolerance, kF64Tolerance, kF64Tolerance};
  } else {
    const RefForward pf = plain_forward_f32(p.q, p.k, p.v, p.shape, p.q_pos, p.k_pos, p.causal, p.scale);
    c.plain.out = max_abs_error(pf.out, ref_f.out);
    c.plain.lse = max_abs_error(pf.lse, ref_f.lse);
    // allowed = 2 * err(plain) + FLT_EPSILON * (max|reference| + 0.3)
    auto rule = [](double plain, const std::vector<double>& ref) {
      return 2 * plain + FLT_EPSILON * (max_abs_finite(ref) + kF32FloorOffset);
    };
    c.allowed.out = rule(c.plain.out, ref_f.out);
    c.allowed.lse = rule(c.plain.lse, ref_f.lse);
    if (c.backward) {
      const RefBackward pb = plain_backward_f32(p.q, p.k, p.v, p.dout, p.shape, p.q_pos, p.k_pos, p.causal, p.scale);
      c.plain.dq = max_abs_error(pb.dq, ref_b.dq);
      c.plain.dk = max_abs_error(pb.dk, ref_b.dk);
      c.plain.dv = max_abs_error(pb.dv, ref_b.dv);
      c.allowed.dq = rule(c.plain.dq, ref_b.dq);
      c.allowed.dk = rule(c.plain.dk, ref_b.dk);
      c.allowed.dv = rule(c.plain.dv, ref_b.dv);
    }
  }
  c.passed = within(c.err, c.allowed);
  return c;
}

}  // namespace cpsim
