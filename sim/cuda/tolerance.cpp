// How a GPU run is checked against the f64 reference on the same (bf16-rounded, for bf16 runs) inputs.
//
// bf16 follows Transformer Engine's context-parallel tests, which compare out, dq, dk, dv element by element with
// atol = rtol = 2.5e-2 (3.5e-2 with grouped-query attention). bf16 keeps 8 significant bits (relative rounding
// 2^-9 = 0.2%); p and ds are rounded to bf16 before their products, out after every ring merge, so errors of a few
// tenths of a percent of the largest values are expected and 2.5e-2 leaves room for C = 8 merges.
// f32 keeps 24 bits (6e-8): at the checked sizes an f32 kernel's error stays near 1e-6 of the values (sums over at
// most a few thousand terms), so atol 1e-5 and rtol 1e-4 still fail anything computed in bf16 by mistake.
#include <algorithm>
#include <cmath>

#include "sim/core/error.hpp"
#include "sim/cuda/cuda_api.hpp"

namespace cpsim {

GpuTolerance gpu_tolerance(DType dtype, bool gqa) {
  if (dtype == DType::bf16) {
    const double t = gqa ? 3.5e-2 : 2.5e-2;
    const std::string s = gqa ? "3.5e-2" : "2.5e-2";
    return {t, t,
            "bf16: |err| <= " + s + " + " + s + " x |reference| per element (Transformer Engine's CP tests" +
                (gqa ? ", GQA)" : ")")};
  }
  if (dtype == DType::f32) return {1e-5, 1e-4, "f32: |err| <= 1e-5 + 1e-4 x |reference| per element"};
  throw UsageError("GPU runs are checked in bf16 or f32 (got " + std::string(dtype_name(dtype)) + ")");
}

CloseCheck check_close(const std::vector<double>& got, const std::vector<double>& want, const GpuTolerance& tol) {
  if (got.size() != want.size())
    throw Error("cannot compare results of " + std::to_string(got.size()) + " and " + std::to_string(want.size()) +
                " values");
  CloseCheck c;
  double max_ref = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double a = got[i], b = want[i];
    if (std::isfinite(b)) max_ref = std::max(max_ref, std::abs(b));
    if (std::isinf(a) && a == b) continue;  // both -inf: a row that sees no key
    const double e = std::abs(a - b);
    if (!std::isfinite(e)) {  // NaN, or an infinity against a finite value
      c.max_abs_error = INFINITY;
      c.worst_ratio = INFINITY;
      continue;
    }
    c.max_abs_error = std::max(c.max_abs_error, e);
    c.worst_ratio = std::max(c.worst_ratio, e / (tol.atol + tol.rtol * std::abs(b)));
  }
  c.allowed = tol.atol + tol.rtol * max_ref;
  c.passed = c.worst_ratio <= 1.0;
  return c;
}

}  // namespace cpsim
