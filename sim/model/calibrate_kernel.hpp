// The fixed cost of every kernel call (attention.launch_us) fitted to what the GPU itself measured:
// `cpsim bench gpu_attention --json`, causal attention of batch x heads at two lengths S or more.
//
// The bench keeps heads fixed while S grows, so flops grow as S^2 and a per-call cost, constant in S, is told apart
// from the kernel's rate (the published sweeps hold batch x S fixed and cannot: fit.hpp, 2.). Each point, forward
// and backward, as attention_us has it (cost.hpp: f the occupancy factor):
//   t = launch + f(S) flops(S) (a_dir + c_dir / S)       a = 1 / tflops, c = half_len / tflops of that direction
// Linear in (launch, a_fwd, c_fwd, a_bwd, c_bwd); at two lengths each half_len is the machine's (c = a h). Weighted
// least squares on the relative error, launch >= 0.
#pragma once
#include <string>

#include "sim/model/calibrate.hpp"
#include "sim/model/machine.hpp"

namespace cpsim::model {

struct KernelLaunchFit {
  double launch_us = 0;
  bool at_bound = false;  // the unconstrained optimum was negative: 0
  double rms = 0;         // relative time error over the points, with the fitted launch
  std::string rows;       // "4096..65536, 5 lengths, forward and backward"
};
// Needs two lengths or more (UsageError otherwise, naming the bench file and the fix).
KernelLaunchFit fit_kernel_launch(const Machine& m, const AttentionBench& bench);

// The machine as the bench's kernels run: cpsim's own CUDA kernels (sim/cuda/kernels) neither split a call's keys
// nor pack GQA heads, and start the longest query tiles first (cost.hpp), so a machine fitted to them says so
// (attention.max_kv_splits 1, pack_gqa 0, forward_longest_first 1).
Machine with_own_kernels(Machine m);

}  // namespace cpsim::model
