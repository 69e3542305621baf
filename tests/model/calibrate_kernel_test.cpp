// The per-call cost fitted from the GPU's own bench (calibrate_kernel.hpp): recovered from a bench the model
// generated, at two lengths and at five, and refused at one.
#include <doctest/doctest.h>

#include "sim/core/error.hpp"
#include "sim/model/calibrate_kernel.hpp"
#include "sim/model/cost.hpp"

using namespace cpsim;
using namespace cpsim::model;

namespace {

// What attention_us gives for `bench`'s shape on `m` at each length: the bench a GPU like m would print.
AttentionBench generated(const Machine& m, std::vector<double> seqs, std::int64_t heads) {
  AttentionBench b;
  b.origin = "generated";
  b.heads = heads;
  b.head_dim = 128;
  b.seqs = std::move(seqs);
  for (double S : b.seqs) {
    const auto s = static_cast<std::int64_t>(S);
    b.fwd_ms.push_back(attention_us(m, square_attention(heads, s, 128, true, false)) / 1e3);
    b.bwd_ms.push_back(attention_us(m, square_attention(heads, s, 128, true, true)) / 1e3);
  }
  return b;
}

}  // namespace

TEST_CASE("the per-call cost is recovered from a bench at two lengths and at five") {
  Machine m = with_own_kernels(load_machine("h100-sxm-8"));
  m.launch_us = 25;
  for (const auto& seqs : {std::vector<double>{1024, 8192}, std::vector<double>{512, 1024, 2048, 4096, 8192}}) {
    CAPTURE(seqs.size());
    const KernelLaunchFit f = fit_kernel_launch(with_own_kernels(load_machine("h100-sxm-8")), generated(m, seqs, 8));
    CHECK(f.launch_us == doctest::Approx(25).epsilon(0.01));
    CHECK_FALSE(f.at_bound);
    CHECK(f.rms < 1e-6);
  }
  // No per-call cost in the data: held at 0 or found near it, never negative.
  m.launch_us = 0;
  const KernelLaunchFit zero = fit_kernel_launch(m, generated(m, {1024, 8192}, 8));
  CHECK(zero.launch_us >= 0);
  CHECK(zero.launch_us < 0.5);
}

TEST_CASE("a bench of one length cannot separate the per-call cost and is refused with the fix") {
  const Machine m = load_machine("h100-sxm-8");
  try {
    fit_kernel_launch(m, generated(m, {4096}, 8));
    FAIL("a one-length bench was accepted");
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()).find("two lengths") != std::string::npos);
    CHECK(std::string(e.what()).find("--seq 4096 16384") != std::string::npos);
  }
}
