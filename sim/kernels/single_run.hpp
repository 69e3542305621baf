// Attention on one device, the whole problem in one call each way: what `cpsim attention` and `cpsim bench attention`
// time, and what the tests compare with the reference.
//   upload q, k, v, dout -> attention_forward -> attention_backward (into zeroed dq, dk, dv) -> download
#pragma once
#include <cstdint>

#include "sim/kernels/check.hpp"
#include "sim/kernels/device.hpp"

namespace cpsim {

struct SingleRun {
  RefForward fwd;                 // out [B, Sq, Nq, D], lse [B, Nq, Sq], widened to double
  RefBackward bwd;                // dq, dk, dv (empty when the backward was not run)
  WorkCounts fwd_work, bwd_work;  // as the Device base recorded them
  double fwd_seconds = 0, bwd_seconds = 0;
  std::int64_t peak_bytes = 0;  // the device's peak while the run's buffers were held
};

// problem.dout may be empty when backward is false. dtype: the device buffers' dtype.
SingleRun run_single_device(Device& dev, const AttentionProblem& problem, DType dtype, bool backward = true);

// Deterministic normal inputs (streams q = 0, k = 1, v = 2, dout = 3), positions 0..S-1 for both sides;
// f32 problems get float-representable values, so the reference sees exactly what the device sees.
AttentionProblem random_problem(const AttentionShape& shape, bool causal, DType dtype, std::uint64_t seed);

}  // namespace cpsim
