// `cpsim bench gpu_attention`: causal attention forward and backward TFLOP/s on one GPU (B = 1, 64 heads, D = 128,
// S = 4K .. 64K by default) beside a cuBLAS bf16 GEMM measured in the same run, and their ratios; with several
// --kernel, every kernel on the same shapes and the first one's speed over each other's.
// Built only with the CUDA backend (sim/CMakeLists.txt leaves this file out otherwise).
//
// Useful causal flops are the Device base's: 4 D per visible pair forward, 10 D backward (sim/cuda/bench.cpp).
// Goal (docs/performance/gpu.md): on one H200, forward >= 0.40 and backward >= 0.30 of the GEMM rate at S = 16K.
// The GEMM is optional (--gemm-n 0, or no cuBLAS on the machine): the attention rows are printed without ratios.
#include <cinttypes>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/printf.h>

#include "sim/cli/cli.hpp"
#include "sim/core/error.hpp"
#include "sim/core/json.hpp"
#include "sim/cuda/bench.hpp"
#include "sim/cuda/probe.hpp"

namespace cpsim::cli {
namespace {

constexpr double kForwardGoal = 0.40, kBackwardGoal = 0.30;
constexpr std::int64_t kGoalSeq = 16384;

struct Point {
  GpuKernel kernel;
  std::int64_t seq;
  GpuAttentionTiming t;
  double fwd_tflops() const { return t.fwd_flops / (t.fwd_ms * 1e-3) / 1e12; }
  double bwd_tflops() const { return t.bwd_flops / (t.bwd_ms * 1e-3) / 1e12; }
};

// The point of kernel k at sequence length s (points are every kernel x every length).
const Point* find(const std::vector<Point>& points, GpuKernel k, std::int64_t s) {
  for (const Point& p : points)
    if (p.kernel == k && p.seq == s) return &p;
  return nullptr;
}

int bench_gpu_attention(const std::vector<std::string>& args) {
  po::options_description desc("cpsim bench gpu_attention options");
  std::vector<std::int64_t> seqs{4096, 8192, 16384, 32768, 65536};
  std::vector<std::string> kernel_names{"auto"};
  std::int64_t heads = 64, kv_heads = 0, head_dim = 128, gemm_n = 8192;
  std::string dtype_s = "bf16";
  int reps = 3, device = 0;
  bool json = false;
  desc.add_options()                                                                                          //
      ("seq", po::value(&seqs)->multitoken(), "sequence lengths (default 4096 8192 16384 32768 65536)")       //
      ("heads", po::value(&heads)->default_value(64), "query heads")                                          //
      ("kv-heads", po::value(&kv_heads)->default_value(0), "KV heads (0: as many as query heads)")            //
      ("head-dim", po::value(&head_dim)->default_value(128), "head dim")                                      //
      ("dtype", po::value(&dtype_s)->default_value("bf16"), "bf16 (tensor cores) or f32")                     //
      ("kernel", po::value(&kernel_names)->multitoken(), "auto | mma2 | mma1 | simt; several: side by side")  //
      ("reps", po::value(&reps)->default_value(3), "timed repetitions per point (the best counts)")           //
      ("gemm-n", po::value(&gemm_n)->default_value(8192), "the cuBLAS GEMM's n (n x n x n); 0: no GEMM")      //
      ("device", po::value(&device)->default_value(0), "GPU index")                                           //
      ("json", po::bool_switch(&json), "print one JSON object");
  po::variables_map vm;
  if (!parse("bench gpu_attention", desc, args, vm)) return 0;
  const DType dtype = parse_dtype(dtype_s);
  require(dtype == DType::bf16 || dtype == DType::f32, "the GPU benchmark runs bf16 or f32", "use --dtype bf16");
  if (kv_heads == 0) kv_heads = heads;
  require(heads >= 1 && kv_heads >= 1 && head_dim >= 1 && reps >= 1,
          "heads, KV heads, head dim and reps must be at least 1", "use --heads 64 --head-dim 128 --reps 3");
  require(heads % kv_heads == 0,
          "--heads must be a multiple of --kv-heads (got " + std::to_string(heads) + " and " +
              std::to_string(kv_heads) + ")",
          "use --heads 64 --kv-heads 8");
  require(gemm_n == 0 || gemm_n >= 256, "--gemm-n must be 0 (no GEMM) or at least 256", "use --gemm-n 8192");
  for (auto s : seqs)
    require(s >= 1, "every --seq must be at least 1 (got " + std::to_string(s) + ")", "use --seq 16384");
  std::vector<GpuKernel> kernels;
  for (const std::string& name : kernel_names) {
    kernels.push_back(parse_gpu_kernel(name));
    if (const std::optional<UsageError> why = gpu_kernel_problem(kernels.back(), dtype, head_dim)) throw *why;
  }
  const std::string problem = cuda_runtime_problem();
  if (!problem.empty()) throw Error("bench gpu_attention: " + problem);

  const GpuProbe probe = probe_gpus();
  const std::string gpu_name = device < static_cast<int>(probe.gpus.size()) ? probe.gpus[device].name : "?";
  // 1. Attention, every kernel at every length.
  std::vector<Point> points;
  for (GpuKernel k : kernels)
    for (auto s : seqs)
      points.push_back(Point{k, s, time_gpu_attention({s, heads, kv_heads, head_dim, dtype}, k, reps, device)});
  // 2. The GEMM, last, so that a machine without cuBLAS still gets the attention figures.
  double gemm = 0;  // 0: not measured
  std::string gemm_note = gemm_n == 0 ? "not run (--gemm-n 0)" : "";
  if (gemm_n > 0) {
    try {
      gemm = cublas_bf16_gemm_tflops(gemm_n, device);
    } catch (const Error& e) {
      gemm_note = e.what();
    }
  }
  auto ratio = [&](double tflops) { return gemm > 0 ? tflops / gemm : 0.0; };
  // The goal, per kernel, at S = 16K (null where the GEMM or that length was not measured).
  auto goal_met = [&](GpuKernel k, bool& met) {
    const Point* p = find(points, k, kGoalSeq);
    if (p == nullptr || gemm <= 0) return false;
    met = ratio(p->fwd_tflops()) >= kForwardGoal && ratio(p->bwd_tflops()) >= kBackwardGoal;
    return true;
  };

  if (json) {
    Json gemm_json{{"n", gemm_n}, {"tflops", gemm > 0 ? Json(gemm) : Json()}};
    if (gemm <= 0) gemm_json["note"] = gemm_note;
    Json pts = Json::array();
    for (const Point& p : points)
      pts.push_back({{"kernel", gpu_kernel_name(p.kernel)},
                     {"seq", p.seq},
                     {"fwd_ms", p.t.fwd_ms},
                     {"fwd_tflops", p.fwd_tflops()},
                     {"fwd_ratio", gemm > 0 ? Json(ratio(p.fwd_tflops())) : Json()},
                     {"fwd_kernel", p.t.fwd_path},
                     {"bwd_ms", p.t.bwd_ms},
                     {"bwd_tflops", p.bwd_tflops()},
                     {"bwd_ratio", gemm > 0 ? Json(ratio(p.bwd_tflops())) : Json()},
                     {"bwd_kernel", p.t.bwd_path}});
    Json met_json = Json::object();
    for (GpuKernel k : kernels) {
      bool met = false;
      met_json[gpu_kernel_name(k)] = goal_met(k, met) ? Json(met) : Json();
    }
    const Json j{
        {"bench", "gpu_attention"},
        {"gpu", gpu_name},
        {"dtype", dtype_name(dtype)},
        {"causal", true},
        {"batch", 1},
        {"heads", heads},
        {"kv_heads", kv_heads},
        {"head_dim", head_dim},
        {"gemm", std::move(gemm_json)},
        {"points", std::move(pts)},
        {"goal",
         {{"seq", kGoalSeq}, {"fwd_ratio", kForwardGoal}, {"bwd_ratio", kBackwardGoal}, {"met", std::move(met_json)}}}};
    std::cout << json_text(j) << "\n";
    return 0;
  }
  fmt::printf("causal attention on %s, %s, B=1, %" PRId64 "/%" PRId64 " heads, D=%" PRId64 "\n", gpu_name.c_str(),
              std::string(dtype_name(dtype)).c_str(), heads, kv_heads, head_dim);
  if (gemm > 0)
    fmt::printf("cuBLAS bf16 GEMM %" PRId64 " x %" PRId64 " x %" PRId64 " (f32 accumulate): %.1f TFLOP/s\n", gemm_n,
                gemm_n, gemm_n, gemm);
  else
    fmt::printf("cuBLAS bf16 GEMM: %s; no ratios to it\n", gemm_note.c_str());
  fmt::printf("%7s %6s %10s %9s %9s %6s %10s %9s %9s\n", "S", "kernel", "fwd ms", "fwd TF/s", "fwd/gemm", "kernel",
              "bwd ms", "bwd TF/s", "bwd/gemm");
  for (const Point& p : points)
    fmt::printf("%7" PRId64 " %6s %10.3f %9.1f %9.2f %6s %10.3f %9.1f %9.2f\n", p.seq, p.t.fwd_path.c_str(), p.t.fwd_ms,
                p.fwd_tflops(), ratio(p.fwd_tflops()), p.t.bwd_path.c_str(), p.t.bwd_ms, p.bwd_tflops(),
                ratio(p.bwd_tflops()));
  // Several kernels: the first one's speed over each other's, on the same shapes.
  for (std::size_t i = 1; i < kernels.size(); ++i)
    for (auto s : seqs) {
      const Point *a = find(points, kernels[0], s), *b = find(points, kernels[i], s);
      fmt::printf("S=%" PRId64 ": %s over %s: forward %.2fx, backward %.2fx\n", s, gpu_kernel_name(kernels[0]),
                  gpu_kernel_name(kernels[i]), b->t.fwd_ms / a->t.fwd_ms, b->t.bwd_ms / a->t.bwd_ms);
    }
  for (GpuKernel k : kernels) {
    bool met = false;
    if (goal_met(k, met))
      fmt::printf("goal at S = %" PRId64 " (--kernel %s): forward >= %.2f x and backward >= %.2f x the GEMM rate: %s\n",
                  kGoalSeq, gpu_kernel_name(k), kForwardGoal, kBackwardGoal, met ? "met" : "NOT met");
  }
  return 0;
}

}  // namespace

CPSIM_BENCH(gpu_attention, "causal attention TFLOP/s on one GPU beside a cuBLAS bf16 GEMM", bench_gpu_attention);

}  // namespace cpsim::cli
