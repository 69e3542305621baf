// The presets' fits to the published figures (sim/model/fit.hpp): the fitter recovers what the stated model
// generated, the presets hold exactly what the fits give, the launch is shown not to be determined by sweeps that
// hold batch x S fixed (and recovered where the work per call varies), and the stored framework.step_us is what
// re-running its fit gives.
#include "sim/model/fit.hpp"

#include <doctest/doctest.h>

#include <cmath>

#include "relative_error.hpp"
#include "sim/model/cost.hpp"
#include "sim/model/predict.hpp"

using namespace cpsim;
using namespace cpsim::model;

namespace {

// A sweep the stated model generates: t = launch + flops / rate(S) at each point, as published TFLOP/s.
KernelSweep generated(const KernelCurve& c, double launch_us, bool causal, std::int64_t tokens) {
  KernelSweep s;
  s.source = "generated";
  s.head_dim = 128;
  s.causal = causal;
  s.tokens = tokens;
  s.seqs = {512, 1024, 2048, 4096, 8192, 16384};
  for (std::size_t i = 0; i < s.seqs.size(); ++i) {
    const Op op = square_attention(s.batch_heads(i), static_cast<std::int64_t>(s.seqs[i]), 128, causal, false);
    // The kernel's time on the sweep's H100 (132 SMs, 128-row tiles, one tile per SM: cost.hpp).
    const double occupancy = occupancy_factor(132, 128, 1, false, op);
    s.tflops.push_back(op.flops / (launch_us + op.flops / c.rate(s.seqs[i]) * occupancy * 1e6) / 1e6);
  }
  return s;
}

}  // namespace

TEST_CASE("the kernel fit recovers the curve the stated model generated, launch included") {
  const KernelCurve truth{612.0, 350.0};
  for (const bool causal : {false, true}) {
    CAPTURE(causal);
    const SweepFit f = fit_kernel_sweep(generated(truth, 7.0, causal, 16384), 7.0);
    CHECK(f.curve.tflops == doctest::Approx(truth.tflops).epsilon(1e-9));
    CHECK(f.curve.half_len == doctest::Approx(truth.half_len).epsilon(1e-9));
    CHECK(f.worst < 1e-9);
    // Fitted with a different launch, the curve is another one: the launch given is used.
    CHECK(std::abs(fit_kernel_sweep(generated(truth, 7.0, causal, 16384), 0).curve.half_len - truth.half_len) > 1);
  }
}

TEST_CASE("every kernel curve of the GPU presets is the least-squares fit of the sweep its source names") {
  const Machine h100 = load_machine("h100-sxm-8"), h800 = load_machine("h800-sxm-8");
  for (const auto& [m, sweeps] :
       {std::pair{&h100, &flash_attention_3_sweeps()}, std::pair{&h800, &flash_attention_2_sweeps()}})
    for (const KernelSweep& s : *sweeps) {
      CAPTURE(m->name);
      CAPTURE(s.source);
      const KernelCurves k = m->curves_for(s.head_dim);
      const KernelCurve& c = s.backward ? (s.causal ? k.backward_causal : k.backward_full)
                                        : (s.causal ? k.forward_causal : k.forward_full);
      const SweepFit f = fit_kernel_sweep(s, m->launch_us);
      CHECK(c.tflops == doctest::Approx(f.curve.tflops).epsilon(1e-5));  // the preset prints 6 digits
      CHECK(c.half_len == doctest::Approx(f.curve.half_len).epsilon(1e-5));
      CHECK(m->sources
                .at("kernel_d" + std::to_string(s.head_dim) + (s.backward ? ".backward" : ".forward") +
                    (s.causal ? "_causal" : "_full") + "_tflops")
                .find(s.source) != std::string::npos);
    }
  // The causal backward no paper plots: the fit of the derived sweep.
  const auto& fa3 = flash_attention_3_sweeps();
  const SweepFit derived =
      fit_kernel_sweep(derived_causal_backward(find_sweep(fa3, 128, true, false), find_sweep(fa3, 128, false, false),
                                               find_sweep(fa3, 128, false, true)),
                       h100.launch_us);
  CHECK(h100.curves_for(128).backward_causal.tflops == doctest::Approx(derived.curve.tflops).epsilon(1e-5));
}

TEST_CASE("the A100's FlashAttention-2 curves are scaled to give ring-flash-attention's one-GPU run exactly") {
  const Machine m = load_machine("a100-sxm-8");
  const PublishedOneGpu& one = ring_flash_attention_one_gpu("a100-sxm-8");
  const Problem p = ring_flash_attention_problem(1);
  CHECK(1e6 / single_gpu_us(p, m, false) == doctest::Approx(one.forward_per_s).epsilon(1e-4));
  CHECK(1e6 / single_gpu_us(p, m, true) == doctest::Approx(one.total_per_s).epsilon(1e-4));
}

TEST_CASE("sweeps that hold batch x S fixed leave the launch undetermined; sweeps whose work per call varies fix it") {
  // 1. The published sweeps: the residual is the same for any launch from 0 to 20 us (to hundredths of a percent:
  //    the tiles' occupancy differs a little from point to point), the estimate's standard error is larger than any
  //    plausible launch, and launches up to tens of us keep every half_len >= 0.
  for (const auto* sweeps : {&flash_attention_3_sweeps(), &flash_attention_2_sweeps()}) {
    const LaunchFit l = fit_shared_launch(*sweeps);
    REQUIRE(l.profile.size() == 5);
    CHECK(l.profile.front().first == 0);
    CHECK(l.profile.back().first == 20);
    CHECK(std::abs(l.profile.back().second - l.profile.front().second) < 5e-4);
    CHECK(l.standard_error > 100);
    CHECK(l.max_launch_us > 20);
  }
  // 2. A generated sweep of a known launch that times the same S at two batch sizes (4K and 64K tokens per call):
  //    the work per call no longer grows with S alone, and the joint fit recovers the launch.
  KernelSweep varied = generated({600, 300}, 25.0, false, 16384);
  varied.seqs = {512, 1024, 2048, 512, 1024, 2048};
  varied.point_tokens = {4096, 4096, 4096, 65536, 65536, 65536};
  varied.tflops.clear();
  for (std::size_t i = 0; i < varied.seqs.size(); ++i) {
    const Op op = square_attention(varied.batch_heads(i), static_cast<std::int64_t>(varied.seqs[i]), 128, false, false);
    const double occupancy = occupancy_factor(132, 128, 1, false, op);  // the sweep's H100, as fit.cpp sees it
    varied.tflops.push_back(
        op.flops / (25.0 + occupancy * op.flops / KernelCurve{600, 300}.rate(varied.seqs[i]) * 1e6) / 1e6);
  }
  const LaunchFit l = fit_shared_launch({varied});
  CHECK(l.launch_us == doctest::Approx(25.0).epsilon(1e-6));
  CHECK(l.profile.front().second > 1e-3);  // held at 0 the launch leaves a residual
}

TEST_CASE("the H800 and A100 presets' step cost is what re-running its fit to ring-flash-attention's rows gives") {
  for (const char* name : {"h800-sxm-8", "a100-sxm-8"}) {
    CAPTURE(name);
    const Machine m = load_machine(name);
    const StepFit f = fit_step_bytes(m, ring_runs_on(name));
    REQUIRE(f.rows.size() == 4);  // zigzag and contiguous, forward and forward + backward
    CHECK(!f.at_bound);
    CHECK(std::abs(f.step_bytes - m.step_bytes_per_element) <= 0.005);  // stored to 0.01 byte
    CHECK(m.step_us == 0);
    CHECK(f.rms < f.rms_at_0);
    for (const auto& r : f.rows) {
      CAPTURE(sharding_name(r.run.sharding));
      CAPTURE(r.run.backward);
      CHECK(relative_error(r.model_per_s, r.run.per_s) <= 0.15);  // issue 18's goal, with the fitted cost
      // A step mark per ring step, each moving the bytes per element over the rank's output at the memory's rate.
      Machine one_byte = m;
      one_byte.step_us = 0;
      one_byte.step_bytes_per_element = 1;
      const double per_step = step_cost_us(one_byte, ring_flash_attention_out_elements());
      CHECK(r.us_per_byte == doctest::Approx((r.run.backward ? 16 : 8) * per_step).epsilon(0.05));
    }
  }
}

TEST_CASE("the step fit recovers the step cost a machine generated its runs with, and stops at 0 below it") {
  Machine m = load_machine("h800-sxm-8");
  for (const double truth : {4.0, 30.0}) {
    CAPTURE(truth);
    m.step_bytes_per_element = truth;
    std::vector<PublishedRingRun> runs = ring_runs_on(m.name);
    for (PublishedRingRun& r : runs) {
      Problem p = ring_flash_attention_problem(8);
      p.sharding = r.sharding;
      r.per_s = 1e6 / predict_cell(p, {StrategyKind::ring, 0}, m, r.backward, 1).time_us(r.backward);
    }
    const StepFit f = fit_step_bytes(m, runs);
    CHECK(f.step_bytes == doctest::Approx(truth).epsilon(1e-4));
    CHECK(f.rms < 1e-6);
  }
  // Runs faster than the model with no step cost at all: the least squares wants a negative cost; 0 is kept.
  m.step_bytes_per_element = 0;
  std::vector<PublishedRingRun> fast = ring_runs_on(m.name);
  for (PublishedRingRun& r : fast) r.per_s *= 2;
  const StepFit f = fit_step_bytes(m, fast);
  CHECK(f.at_bound);
  CHECK(f.step_bytes == 0);
}
