// `cpsim bench gpu_attention`: causal attention forward and backward TFLOP/s on one GPU (B = 1, 64 heads, D = 128,
// S = 4K .. 64K by default) beside a cuBLAS bf16 GEMM measured in the same run, and their ratios.
// Built only with the CUDA backend (sim/CMakeLists.txt leaves this file out otherwise).
//
// Useful causal flops are the Device base's: 4 D per visible pair forward, 10 D backward (sim/cuda/bench.cpp).
// Goal (docs/performance/gpu.md): on one H200, forward >= 0.40 and backward >= 0.30 of the GEMM rate at S = 16K.
#include <cinttypes>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

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
  std::int64_t seq;
  GpuAttentionTiming t;
  double fwd_tflops() const { return t.fwd_flops / (t.fwd_ms * 1e-3) / 1e12; }
  double bwd_tflops() const { return t.bwd_flops / (t.bwd_ms * 1e-3) / 1e12; }
};

int bench_gpu_attention(const std::vector<std::string>& args) {
  po::options_description desc("cpsim bench gpu_attention options");
  std::vector<std::int64_t> seqs{4096, 8192, 16384, 32768, 65536};
  std::int64_t heads = 64, head_dim = 128, gemm_n = 8192;
  std::string dtype_s = "bf16";
  int reps = 3, device = 0;
  bool json = false;
  desc.add_options()                                                                                     //
      ("seq", po::value(&seqs)->multitoken(), "sequence lengths (default 4096 8192 16384 32768 65536)")  //
      ("heads", po::value(&heads)->default_value(64), "attention heads")                                 //
      ("head-dim", po::value(&head_dim)->default_value(128), "head dim")                                 //
      ("dtype", po::value(&dtype_s)->default_value("bf16"), "bf16 (tensor cores) or f32")                //
      ("reps", po::value(&reps)->default_value(3), "timed repetitions per point (the best counts)")      //
      ("gemm-n", po::value(&gemm_n)->default_value(8192), "the cuBLAS GEMM's n (n x n x n)")             //
      ("device", po::value(&device)->default_value(0), "GPU index")                                      //
      ("json", po::bool_switch(&json), "print one JSON object");
  po::variables_map vm;
  if (!parse("bench gpu_attention", desc, args, vm)) return 0;
  const DType dtype = parse_dtype(dtype_s);
  require(dtype == DType::bf16 || dtype == DType::f32, "the GPU benchmark runs bf16 or f32", "use --dtype bf16");
  require(heads >= 1 && head_dim >= 1 && reps >= 1 && gemm_n >= 256, "heads, head dim and reps must be at least 1",
          "use --heads 64 --head-dim 128 --reps 3 --gemm-n 8192");
  for (auto s : seqs)
    require(s >= 1, "every --seq must be at least 1 (got " + std::to_string(s) + ")", "use --seq 16384");
  const std::string problem = cuda_runtime_problem();
  if (!problem.empty()) throw Error("bench gpu_attention: " + problem);

  const GpuProbe probe = probe_gpus();
  const std::string gpu_name = device < static_cast<int>(probe.gpus.size()) ? probe.gpus[device].name : "?";
  const double gemm = cublas_bf16_gemm_tflops(gemm_n, device);
  std::vector<Point> points;
  for (auto s : seqs) points.push_back(Point{s, time_gpu_attention(s, heads, head_dim, dtype, reps, device)});
  bool met = true, any = false;
  for (const Point& p : points)
    if (p.seq == kGoalSeq) {
      any = true;
      met = p.fwd_tflops() >= kForwardGoal * gemm && p.bwd_tflops() >= kBackwardGoal * gemm;
    }

  if (json) {
    JsonWriter j;
    j.begin_object();
    j.key("bench").value("gpu_attention").key("gpu").value(gpu_name).key("dtype").value(dtype_name(dtype));
    j.key("causal").value(true).key("batch").value(1).key("heads").value(heads).key("head_dim").value(head_dim);
    j.key("gemm").begin_object().key("n").value(gemm_n).key("tflops").value(gemm).end_object();
    j.key("points").begin_array();
    for (const Point& p : points) {
      j.begin_object().key("seq").value(p.seq);
      j.key("fwd_ms")
          .value(p.t.fwd_ms)
          .key("fwd_tflops")
          .value(p.fwd_tflops())
          .key("fwd_ratio")
          .value(p.fwd_tflops() / gemm);
      j.key("fwd_kernel").value(p.t.fwd_path);
      j.key("bwd_ms")
          .value(p.t.bwd_ms)
          .key("bwd_tflops")
          .value(p.bwd_tflops())
          .key("bwd_ratio")
          .value(p.bwd_tflops() / gemm);
      j.key("bwd_kernel").value(p.t.bwd_path).end_object();
    }
    j.end_array();
    j.key("goal").begin_object().key("seq").value(kGoalSeq).key("fwd_ratio").value(kForwardGoal);
    j.key("bwd_ratio").value(kBackwardGoal).key("met");
    if (any)
      j.value(met);
    else
      j.null();
    j.end_object().end_object();
    std::cout << j.str() << "\n";
    return 0;
  }
  std::printf("causal attention on %s, %s, B=1, %" PRId64 " heads, D=%" PRId64 "\n", gpu_name.c_str(),
              std::string(dtype_name(dtype)).c_str(), heads, head_dim);
  std::printf("cuBLAS bf16 GEMM %" PRId64 " x %" PRId64 " x %" PRId64 " (f32 accumulate): %.1f TFLOP/s\n", gemm_n,
              gemm_n, gemm_n, gemm);
  std::printf("%7s %6s %10s %9s %9s %10s %9s %9s\n", "S", "kernel", "fwd ms", "fwd TF/s", "fwd/gemm", "bwd ms",
              "bwd TF/s", "bwd/gemm");
  for (const Point& p : points)
    std::printf("%7" PRId64 " %6s %10.3f %9.1f %9.2f %10.3f %9.1f %9.2f\n", p.seq, p.t.fwd_path.c_str(), p.t.fwd_ms,
                p.fwd_tflops(), p.fwd_tflops() / gemm, p.t.bwd_ms, p.bwd_tflops(), p.bwd_tflops() / gemm);
  if (any)
    std::printf("goal at S = %" PRId64 ": forward >= %.2f x and backward >= %.2f x the GEMM rate: %s\n", kGoalSeq,
                kForwardGoal, kBackwardGoal, met ? "met" : "NOT met");
  return 0;
}

}  // namespace

CPSIM_BENCH(gpu_attention, "causal attention TFLOP/s on one GPU beside a cuBLAS bf16 GEMM", bench_gpu_attention);

}  // namespace cpsim::cli
