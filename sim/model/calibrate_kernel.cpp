#include "sim/model/calibrate_kernel.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

#include "sim/core/error.hpp"
#include "sim/model/cost.hpp"

namespace cpsim::model {
namespace {

// One row of the weighted system: x . (launch, a_fwd, c_fwd, a_bwd, c_bwd) = t.
constexpr int kUnknowns = 5;
struct Row {
  std::array<double, kUnknowns> x;
  double t;
};

// Least squares over the unknowns marked free (the others held at 0), each row weighted by 1 / t (relative error):
// the normal equations solved by Gaussian elimination with partial pivoting.
std::array<double, kUnknowns> fit(const std::vector<Row>& rows, const std::array<bool, kUnknowns>& free) {
  std::array<std::array<double, kUnknowns + 1>, kUnknowns> n{};
  for (const Row& r : rows)
    for (int i = 0; i < kUnknowns; ++i) {
      for (int j = 0; j < kUnknowns; ++j) n[i][j] += r.x[i] * r.x[j] / (r.t * r.t);
      n[i][kUnknowns] += r.x[i] / r.t;
    }
  for (int i = 0; i < kUnknowns; ++i)
    if (!free[i]) {
      for (int j = 0; j <= kUnknowns; ++j) n[i][j] = 0;
      for (int j = 0; j < kUnknowns; ++j) n[j][i] = 0;
      n[i][i] = 1;
    }
  for (int c = 0; c < kUnknowns; ++c) {
    int p = c;
    for (int r = c + 1; r < kUnknowns; ++r)
      if (std::abs(n[r][c]) > std::abs(n[p][c])) p = r;
    if (!(std::abs(n[p][c]) > 1e-300)) throw Error("fit_kernel_launch: the bench's points do not determine the fit");
    std::swap(n[c], n[p]);
    for (int r = 0; r < kUnknowns; ++r) {
      if (r == c) continue;
      const double k = n[r][c] / n[c][c];
      for (int j = c; j <= kUnknowns; ++j) n[r][j] -= k * n[c][j];
    }
  }
  std::array<double, kUnknowns> out{};
  for (int c = 0; c < kUnknowns; ++c) out[c] = n[c][kUnknowns] / n[c][c];
  return out;
}

std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

}  // namespace

KernelLaunchFit fit_kernel_launch(const Machine& m, const AttentionBench& b) {
  require(b.seqs.size() >= 2, b.origin + " has " + std::to_string(b.seqs.size()) + " length(s); a per-call cost "
                              "needs two lengths or more",
          "run cpsim bench gpu_attention --seq 4096 16384 --json");
  const KernelCurves k = m.curves_for(b.head_dim);
  // 1. One row per point: t = launch + f flops (a + c / S), c = a h. With two lengths h is the machine's (a row's
  //    two kernel terms merge into one); with three or more it is fitted too.
  const bool fit_h = b.seqs.size() >= 3;
  std::vector<Row> rows;
  for (std::size_t i = 0; i < b.seqs.size(); ++i)
    for (const bool backward : {false, true}) {
      const auto S = static_cast<std::int64_t>(b.seqs[i]);
      const Op op = square_attention(b.batch * b.heads, S, b.head_dim, true, backward);
      const double h = (backward ? k.backward_causal : k.forward_causal).half_len;
      const double w = occupancy_factor(m, op) * op.flops * 1e-6;  // us x TFLOP/s
      const double inv_s = 1 / static_cast<double>(S);
      Row r{{1, 0, 0, 0, 0}, (backward ? b.bwd_ms[i] : b.fwd_ms[i]) * 1e3};
      const int at = backward ? 3 : 1;
      r.x[at] = fit_h ? w : w * (1 + h * inv_s);
      r.x[at + 1] = fit_h ? w * inv_s : 0;
      rows.push_back(r);
    }
  // 2. Launch free; a negative optimum is held at 0.
  std::array<bool, kUnknowns> free = {true, true, fit_h, true, fit_h};
  std::array<double, kUnknowns> x = fit(rows, free);
  KernelLaunchFit out;
  if (x[0] < 0) {
    free[0] = false;
    x = fit(rows, free);
    x[0] = 0;
    out.at_bound = true;
  }
  out.launch_us = x[0];
  // 3. Its residuals.
  double sum = 0;
  for (const Row& r : rows) {
    double t = 0;
    for (int i = 0; i < kUnknowns; ++i) t += r.x[i] * x[i];
    sum += std::pow(t / r.t - 1, 2);
  }
  out.rms = std::sqrt(sum / static_cast<double>(rows.size()));
  out.rows = num(b.seqs.front()) + ".." + num(b.seqs.back()) + ", " + std::to_string(b.seqs.size()) +
             " lengths, forward and backward";
  return out;
}

Machine with_own_kernels(Machine m) {
  const char* why = "cpsim bench gpu_attention times cpsim's own kernels, which neither split keys nor pack heads";
  m.max_kv_splits = 1;
  m.pack_gqa = false;
  m.sources["attention.max_kv_splits"] = why;
  m.sources["attention.pack_gqa"] = why;
  m.forward_longest_first = true;
  m.sources["attention.forward_longest_first"] =
      "cpsim's forward kernels start the latest (longest) query tiles first, every head's at once "
      "(sim/cuda/kernels/attention_mma_fwd.cu)";
  return m;
}

}  // namespace cpsim::model
