// Attention on one device, the whole problem in one call each way: what `cpsim attention` and `cpsim bench attention`
// time, and what the tests compare with the reference. The seeded inputs come from attention_problem
// (sim/runtime/inputs.hpp).
//   upload q, k, v, dout -> attention_forward -> attention_backward (into zeroed dq, dk, dv) -> download
#pragma once
#include <cstdint>

#include "sim/kernels/check.hpp"
#include "sim/kernels/device.hpp"

namespace cpsim {

struct SingleRun {
  RefForward fwd;                                   // out [B, Sq, Nq, D], lse [B, Nq, Sq], widened to double
  RefBackward bwd;                                  // dq, dk, dv (empty when the backward was not run)
  WorkCounts fwd_work, bwd_work;                    // as the Device base recorded them
  double fwd_seconds = 0, bwd_seconds = 0;          // wall-clock time of each call
  double fwd_cpu_seconds = 0, bwd_cpu_seconds = 0;  // CPU time of the calling thread (the CPU device runs on it)
  std::int64_t peak_bytes = 0;                      // the device's peak while the run's buffers were held
};

// problem.dout may be empty when backward is false. dtype: the device buffers' dtype.
// The calling thread's CPU time, unlike wall-clock time, leaves out the time other processes held the core.
SingleRun run_single_device(Device& dev, const AttentionProblem& problem, DType dtype, bool backward = true);

// Seconds of CPU time the calling thread has used (CLOCK_THREAD_CPUTIME_ID).
double thread_cpu_seconds();

}  // namespace cpsim
