#include "sim/model/fit.hpp"

#include <algorithm>
#include <cmath>

#include "sim/core/error.hpp"
#include "sim/model/cost.hpp"
#include "sim/model/predict.hpp"

namespace cpsim::model {
namespace {

constexpr int kSweepSms = 132, kSweepTileRows = 128;  // the H100 SXM5 the published sweeps ran on

// One published point as the stated model sees it: t = launch + f (a + b x), a = 1/tflops, b = half_len/tflops.
struct Point {
  double t_us;  // published: flops / published rate
  double f;     // flops / 1e6 (us x TFLOP/s)
  double x;     // 1 / S
};

std::vector<Point> points(const KernelSweep& s) {
  std::vector<Point> out;
  for (std::size_t i = 0; i < s.seqs.size(); ++i) {
    const auto S = static_cast<std::int64_t>(s.seqs[i]);
    const Op op = square_attention(s.batch_heads(i), S, s.head_dim, s.causal, s.backward);
    // The kernel's time with every SM busy is flops / rate; on the sweep's H100 (132 SMs, 128-row tiles) the call
    // takes occupancy_factor times that (cost.hpp): the factor scales the flops the fit sees.
    const double occupancy = occupancy_factor(kSweepSms, kSweepTileRows, s.ctas_per_sm, s.longest_first, op);
    out.push_back({op.flops / (s.tflops[i] * 1e6), op.flops * 1e-6 * occupancy, 1.0 / static_cast<double>(S)});
  }
  return out;
}

double rms_of(const std::vector<double>& e) {
  double sum = 0;
  for (double x : e) sum += x * x;
  return e.empty() ? 0 : std::sqrt(sum / static_cast<double>(e.size()));
}

// Relative rate errors of a curve (a, b) at a launch: published t / model t - 1.
std::vector<double> rate_errors(const std::vector<Point>& pts, double launch, double a, double b) {
  std::vector<double> e;
  for (const Point& p : pts) e.push_back(p.t_us / (launch + p.f * (a + b * p.x)) - 1);
  return e;
}

// (a, b) by weighted least squares with the launch held: rows (f/t, f x/t) . (a, b) = 1 - launch/t, the 2 x 2
// normal equations solved in closed form.
std::pair<double, double> fit_ab(const std::vector<Point>& pts, double launch) {
  double s00 = 0, s01 = 0, s11 = 0, r0 = 0, r1 = 0;
  for (const Point& p : pts) {
    const double u = p.f / p.t_us, v = p.f * p.x / p.t_us, y = 1 - launch / p.t_us;
    s00 += u * u;
    s01 += u * v;
    s11 += v * v;
    r0 += u * y;
    r1 += v * y;
  }
  const double det = s00 * s11 - s01 * s01;
  return {(r0 * s11 - r1 * s01) / det, (s00 * r1 - s01 * r0) / det};
}

// The sum of squared weighted residuals of every curve refitted with the launch held, and their rate errors.
double sum_of_squares(const std::vector<std::vector<Point>>& curves, double launch, std::vector<double>* errors) {
  double sum = 0;
  for (const auto& pts : curves) {
    const auto [a, b] = fit_ab(pts, launch);
    for (const Point& p : pts) sum += std::pow((launch + p.f * (a + b * p.x)) / p.t_us - 1, 2);
    if (errors)
      for (double e : rate_errors(pts, launch, a, b)) errors->push_back(e);
  }
  return sum;
}

double time_of(const Counted& c, const Machine& m, bool backward, double step_bytes) {
  Machine with = m;
  with.step_us = 0;
  with.step_bytes_per_element = step_bytes;
  return time_cell(c, with, backward, 1).time_us(backward);
}

}  // namespace

SweepFit fit_kernel_sweep(const KernelSweep& sweep, double launch_us) {
  const std::vector<Point> pts = points(sweep);
  const auto [a, b] = fit_ab(pts, launch_us);
  if (!(a > 0) || b < 0) throw Error("fit_kernel_sweep: " + sweep.source + " does not follow the curve's form");
  SweepFit f;
  f.curve = {1 / a, b / a};
  f.errors = rate_errors(pts, launch_us, a, b);
  for (std::size_t i = 0; i < pts.size(); ++i) f.model_tflops.push_back(sweep.tflops[i] * (1 + f.errors[i]));
  f.rms = rms_of(f.errors);
  for (double e : f.errors) f.worst = std::max(f.worst, std::abs(e));
  return f;
}

KernelSweep derived_causal_backward(const KernelSweep& forward_causal, const KernelSweep& forward_full,
                                    const KernelSweep& backward_full) {
  KernelSweep s = backward_full;
  s.causal = true;
  s.source = "causal backward = " + backward_full.source + " x the causal/full forward ratio of " +
             forward_causal.source + " and " + forward_full.source + " at each S";
  for (std::size_t i = 0; i < s.seqs.size(); ++i)
    s.tflops[i] = backward_full.tflops[i] * forward_causal.tflops[i] / forward_full.tflops[i];
  return s;
}

double curve_scale(const KernelCurve& curve, double L, double flops, double kernel_us) {
  return flops / (kernel_us * 1e-6) / curve.rate(L);
}

LaunchFit fit_shared_launch(const std::vector<KernelSweep>& sweeps) {
  // 1. The joint least squares over (launch, a_1, b_1, ..., a_n, b_n) profiled on the launch: for a held launch L
  //    every curve's (a, b) is its own 2 x 2 fit, affine in L, so the residual sum R(L) is a parabola in L and its
  //    vertex is the joint optimum. Three evaluations give it exactly.
  std::vector<std::vector<Point>> curves;
  std::size_t n = 0;
  for (const KernelSweep& s : sweeps) {
    curves.push_back(points(s));
    n += curves.back().size();
  }
  const double r0 = sum_of_squares(curves, 0, nullptr), r1 = sum_of_squares(curves, 1, nullptr),
               r2 = sum_of_squares(curves, 2, nullptr);
  const double c2 = (r2 - 2 * r1 + r0) / 2, c1 = r1 - r0 - c2;  // R(L) = r0 + c1 L + c2 L^2
  LaunchFit out;
  out.launch_us = c2 > 0 ? -c1 / (2 * c2) : 0;
  // 2. Its standard error: for a linear least squares, R(L) - R(L*) = (L - L*)^2 / [(A^T A)^-1]_launch, so the
  //    variance is s^2 / c2 with s^2 the residual variance (n points, 1 + 2 x curves unknowns).
  const double dof = static_cast<double>(n) - 1 - 2 * static_cast<double>(curves.size());
  const double r_min = r0 + c1 * out.launch_us + c2 * out.launch_us * out.launch_us;
  out.standard_error = c2 > 0 ? std::sqrt(std::max(0.0, r_min) / std::max(1.0, dof) / c2) : 1e300;
  // 3. Each curve's half_len falls linearly as the launch rises: b(L) = b(0) + L (b(1) - b(0)). The largest L that
  //    keeps every b >= 0.
  out.max_launch_us = 1e300;
  for (const auto& p : curves) {
    const double b0 = fit_ab(p, 0).second, b1 = fit_ab(p, 1).second;
    if (b1 < b0) out.max_launch_us = std::min(out.max_launch_us, b0 / (b0 - b1));
  }
  // 4. The rate errors with the launch held at a few values, every curve refitted.
  for (const double launch : {0.0, 2.0, 5.0, 10.0, 20.0}) {
    std::vector<double> e;
    sum_of_squares(curves, launch, &e);
    out.profile.emplace_back(launch, rms_of(e));
  }
  return out;
}

std::vector<PublishedRingRun> ring_runs_on(const std::string& machine) {
  std::vector<PublishedRingRun> out;
  for (const PublishedRingRun& r : ring_flash_attention_runs())
    if (r.machine == machine) out.push_back(r);
  return out;
}

StepFit fit_step_bytes(const Machine& m, const std::vector<PublishedRingRun>& runs) {
  // 1. Count every run once; its time at a step cost s is a replay.
  std::vector<Counted> counted;
  for (const PublishedRingRun& r : runs) {
    if (r.machine != m.name) throw Error("fit_step_bytes: a run on " + r.machine + " given for " + m.name);
    Problem p = ring_flash_attention_problem(8);
    p.sharding = r.sharding;
    counted.push_back(count_cell(p, {StrategyKind::ring, 0}, r.backward));
  }
  // 2. Minimise sum ((t_i(s) - T_i) / T_i)^2 over s >= 0 (bytes per element), T_i = 1 / published rate. t_i(s) is
  //    piecewise linear: t_i(s) ~ t_i(0) + g_i s with g_i the secant slope through the current s, then s from the
  //    normal equation.
  std::vector<double> T, t0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    T.push_back(1e6 / runs[i].per_s);
    t0.push_back(time_of(counted[i], m, runs[i].backward, 0));
  }
  double s = 10;  // bytes per element: where the first secant is taken
  std::vector<double> g(runs.size());
  for (int iteration = 0; iteration < 6; ++iteration) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < runs.size(); ++i) {
      g[i] = (time_of(counted[i], m, runs[i].backward, s) - t0[i]) / s;
      num += g[i] / T[i] * (1 - t0[i] / T[i]);
      den += std::pow(g[i] / T[i], 2);
    }
    const double next = den > 0 ? num / den : 0;
    if (next <= 0) {
      s = 0;
      break;
    }
    const bool settled = std::abs(next - s) < 1e-6 * std::max(1.0, s);
    s = next;
    if (settled) break;
  }
  StepFit out;
  out.step_bytes = s;
  out.at_bound = s == 0;
  std::vector<double> e0, e;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    StepFit::Row row;
    row.run = runs[i];
    row.model_per_s_at_0 = 1e6 / t0[i];
    row.model_per_s = 1e6 / time_of(counted[i], m, runs[i].backward, s);
    row.us_per_byte = g[i];
    e0.push_back(row.model_per_s_at_0 / runs[i].per_s - 1);
    e.push_back(row.model_per_s / runs[i].per_s - 1);
    out.rows.push_back(row);
  }
  out.rms_at_0 = rms_of(e0);
  out.rms = rms_of(e);
  return out;
}

}  // namespace cpsim::model
