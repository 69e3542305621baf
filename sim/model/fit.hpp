// The presets' kernel curves and fixed costs fitted to the published figures they cite (published.hpp), by least
// squares, so that no fitted number is typed in: machine_presets.cpp calls fit_kernel_sweep, and
// `cpsim calibrate --published` prints every fit below with its residuals.
//
// 1. Kernel curves. One call on a sweep's shape (batch x heads squares of side S, causal or full, occupancy 1:
//    at least 2048 tiles of 128 rows on 132 SMs at every S), flops = 4 D (forward) or 10 D (backward) per pair:
//        t(S) = launch + flops(S) / rate(S),      rate(S) = tflops x S / (S + half_len)
//    launch is shared by every curve of a GPU (a fixed cost per call); tflops and half_len are each curve's own.
//    flops(S) is taken times the call's occupancy factor on the sweep's H100 (cost.hpp: 132 SMs, 128-row tiles;
//    SMs left idle, the causal tail; 1 at every point of the published sweeps), so that the curve is the rate with every SM
//    busy and attention_us gives the published time on the sweep's own shape.
//    With launch given, (t - launch) / flops = 1/tflops + (half_len / tflops) / S is linear in the two unknowns;
//    each point is weighted by 1 / t (relative error), the published t being flops / published rate.
// 2. The launch. Fitted together with every curve's two parameters (one linear least-squares problem over all the
//    points) it is not determined by these sweeps: they hold batch x S fixed, so flops(S) / S is one constant per
//    curve and launch / flops = (launch / (flops / S)) / S has the very shape of the half_len term. fit_shared_launch
//    says so with numbers: the estimate, its standard error, the residuals at fixed launches, and the largest launch
//    that leaves every half_len >= 0.
// 3. The per-step cost. framework.step_bytes_per_element (what the stack moves per element of a rank's output at
//    every strategy step, clock.hpp) fitted to ring-flash-attention's ring rows on one machine: least squares on
//    the relative time error, >= 0, every row counted once and replayed (the time is piecewise linear in it: a few
//    secant steps converge).
#pragma once
#include <string>
#include <vector>

#include "sim/model/machine.hpp"
#include "sim/model/published.hpp"

namespace cpsim::model {

struct SweepFit {
  KernelCurve curve;
  std::vector<double> model_tflops;  // per point: flops / t(S), launch included
  std::vector<double> errors;        // per point: model / published - 1
  double rms = 0, worst = 0;         // of the errors (worst: the largest |error|)
};
// The curve of one sweep, launch given (1 above).
SweepFit fit_kernel_sweep(const KernelSweep& sweep, double launch_us);
// The causal backward the FlashAttention-3 paper does not plot: full backward x causal forward / full forward at
// each S (the forward's masking ratio). The rule gives FlashAttention-2's causal backward on one H800 at 8K within
// 1% of what ring-flash-attention measured (288 TFLOP/s against 286).
KernelSweep derived_causal_backward(const KernelSweep& forward_causal, const KernelSweep& forward_full,
                                    const KernelSweep& backward_full);
// The factor on a curve's tflops for which `flops` at inner-loop length L take `kernel_us` (launch excluded): a
// machine whose one published run fixes the scale (FlashAttention-2 on an A100, ring-flash-attention's one GPU).
double curve_scale(const KernelCurve& curve, double L, double flops, double kernel_us);

struct LaunchFit {
  double launch_us = 0;                            // the least-squares estimate with every curve's parameters free
  double standard_error = 0;                       // its standard error
  double max_launch_us = 0;                        // the largest launch for which every curve's half_len stays >= 0
  std::vector<std::pair<double, double>> profile;  // (launch held fixed, rms relative error over all points)
};
LaunchFit fit_shared_launch(const std::vector<KernelSweep>& sweeps);

struct StepFit {
  struct Row {
    PublishedRingRun run;
    double model_per_s_at_0 = 0;  // the machine with no per-step cost
    double model_per_s = 0;       // with the fitted step_bytes_per_element
    double us_per_byte = 0;       // d(time) / d(step_bytes_per_element): steps on the critical path x elements / hbm
  };
  double step_bytes = 0;  // framework.step_bytes_per_element
  bool at_bound = false;  // the unconstrained optimum was negative: 0
  std::vector<Row> rows;
  double rms_at_0 = 0, rms = 0;  // rms relative error of the rates
};
// framework.step_bytes_per_element fitted to the runs on `m` (their `machine` must be m.name), with no fixed
// step_us; every other value of m is kept.
StepFit fit_step_bytes(const Machine& m, const std::vector<PublishedRingRun>& runs);
// The runs of ring_flash_attention_runs() on that machine.
std::vector<PublishedRingRun> ring_runs_on(const std::string& machine);

}  // namespace cpsim::model
