// The plain f32 baseline: the reference's loops in single precision.
#include "sim/kernels/plain.hpp"

#include <doctest/doctest.h>

#include <cmath>

#include "sim/kernels/check.hpp"
#include "sim/runtime/inputs.hpp"

using namespace cpsim;

TEST_CASE("the plain f32 baseline is close to the f64 reference but not exact") {
  const AttentionShape sh{.B = 2, .Sq = 40, .Sk = 40, .Nq = 4, .Nkv = 2, .D = 32};
  const AttentionProblem p = attention_problem(sh, true, DType::f32, 4);
  const auto rf = reference_forward(p.q, p.k, p.v, sh, p.q_pos, p.k_pos, true);
  const auto rb = reference_backward(p.q, p.k, p.v, p.dout, sh, p.q_pos, p.k_pos, true);
  const auto pf = plain_forward_f32(p.q, p.k, p.v, sh, p.q_pos, p.k_pos, true);
  const auto pb = plain_backward_f32(p.q, p.k, p.v, p.dout, sh, p.q_pos, p.k_pos, true);
  for (auto [got, want] :
       {std::pair{&pf.out, &rf.out}, {&pf.lse, &rf.lse}, {&pb.dq, &rb.dq}, {&pb.dk, &rb.dk}, {&pb.dv, &rb.dv}}) {
    const double e = max_abs_error(*got, *want);
    CHECK(e > 0);     // single precision leaves a trace
    CHECK(e < 1e-5);  // a few float roundings of values of order 1
  }
}
