// `cpsim bench attention`: GFLOP/s of the tiled kernel (forward, backward; causal, B=1, one thread) beside the rate
// of Eigen's own matrix product on tile-sized operands, measured in the same run, and their ratios.
//
// Useful causal flops are the Device base's: 4 D per visible pair forward, 10 D backward. The GEMM rate is that of
// the two products a forward tile does, [t, D] x [D, t] and [t, t] x [t, D] (2 t t D flops each), measured just
// before and just after each point and averaged. Both sides are timed in the benchmarking thread's CPU time
// (CLOCK_THREAD_CPUTIME_ID): on a shared machine the time other processes hold the core is left out of both.
// Goal (docs/performance/attention.md): forward >= 0.60 and backward >= 0.45 of that rate at S >= 4096.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/printf.h>

#include "sim/cli/cli.hpp"
#include "sim/core/error.hpp"
#include "sim/os/host_memory.hpp"
#include "sim/core/json.hpp"
#include "sim/core/random.hpp"
#include "sim/core/sizes.hpp"
#include "sim/kernels/cpu_device.hpp"
#include "sim/kernels/eigen.hpp"
#include "sim/kernels/single_run.hpp"
#include "sim/runtime/inputs.hpp"

namespace cpsim::cli {
namespace {

constexpr double kForwardGoal = 0.60, kBackwardGoal = 0.45;
constexpr std::int64_t kGoalFromSeq = 4096;

// GFLOP/s of C = A B^T ([t, D] x [D, t]) and C' = P V ([t, t] x [t, D]) on row-major operands, the best of a few
// rounds of at least 0.1 s of CPU time each.
template <class T>
double gemm_gflops(std::int64_t t, std::int64_t D) {
  using M = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  auto filled = [](std::int64_t r, std::int64_t c, std::uint64_t stream) {
    const auto x = normals(1, stream, static_cast<std::size_t>(r * c));
    return M(Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(x.data(), r, c)
                 .template cast<T>());
  };
  const M a = filled(t, D, 0), b = filled(t, D, 1), p = filled(t, t, 2);
  M c(t, t), o(t, D);
  const double flops_per_iter = 2.0 * 2.0 * static_cast<double>(t * t * D);  // two products of 2 t t D
  double best = 0;
  static volatile double sink = 0;
  for (int round = 0; round < 3; ++round) {
    std::int64_t n = 0;
    const double t0 = thread_cpu_seconds();
    double sec = 0;
    do {
      c.noalias() = a * b.transpose();
      o.noalias() = p * b;
      ++n;
    } while ((sec = thread_cpu_seconds() - t0) < 0.1);
    best = std::max(best, flops_per_iter * static_cast<double>(n) / sec / 1e9);
    sink = sink + c(0, 0) + o(0, 0);  // the products are used
  }
  return best;
}

struct Point {
  std::int64_t seq, d, heads;
  double fwd_s, bwd_s, fwd_flops, bwd_flops;
  double gemm;  // GFLOP/s of Eigen's product on tile-sized operands around this point
  double fwd_gflops() const { return fwd_flops / fwd_s / 1e9; }
  double bwd_gflops() const { return bwd_flops / bwd_s / 1e9; }
};

// The best time of a few runs (fewer for long sequences), each on fresh buffers.
Point measure(std::int64_t S, std::int64_t D, std::int64_t heads, DType dtype, int tile) {
  const AttentionShape sh{.B = 1, .Sq = S, .Sk = S, .Nq = heads, .Nkv = heads, .D = D};
  const AttentionProblem p = attention_problem(sh, true, dtype, 1);
  Point pt{S, D, heads, 1e300, 1e300, 0, 0, 0};
  const int runs = S >= 16384 ? 1 : 3;
  for (int i = 0; i < runs; ++i) {
    Recorder rec;
    CpuDevice dev(rec, tile);
    const SingleRun r = run_single_device(dev, p, dtype);
    pt.fwd_s = std::min(pt.fwd_s, r.fwd_cpu_seconds);
    pt.bwd_s = std::min(pt.bwd_s, r.bwd_cpu_seconds);
    pt.fwd_flops = r.fwd_work.flops;
    pt.bwd_flops = r.bwd_work.flops;
  }
  return pt;
}

// What one point holds at once, at most: the problem's q, k, v, dout as doubles (attention_problem), the device's
// q, k, v, out, dout, dq, dk, dv and two lse-sized rows (run_single_device), and out, dq, dk, dv read back as
// doubles: fewer than 16 tensors of [S, N, D] values of 8 bytes; and the GEMM's three t x t operands. A point past
// what this machine has left (sim/os/host_memory.hpp) is refused before anything is allocated, not ended in
// std::bad_alloc; sizes past what one process can address are refused by tensor_bytes.
void check_point_memory(std::int64_t S, std::int64_t D, std::int64_t heads, int tile) {
  const std::int64_t tensor = tensor_bytes("q", {{"S", S, "seq"}, {"N", heads, ""}, {"D", D, "head-dim"}}, 8, "f64");
  const std::int64_t gemm = tensor_bytes("the GEMM's P", {{"t", tile, "tile"}, {"t", tile, "tile"}}, 8, "f64");
  const std::int64_t need = total_bytes("bench attention at S=" + std::to_string(S) + ", D=" + std::to_string(D),
                                        {tensor, tensor, tensor, tensor, tensor, tensor, tensor, tensor, tensor, tensor,
                                         tensor, tensor, tensor, tensor, tensor, tensor, gemm, gemm, gemm});
  const HostMemory m = host_memory();
  const MemoryLimit& limit = m.machine.bytes <= m.process.bytes ? m.machine : m.process;
  require(need <= limit.bytes,
          "bench attention at S=" + std::to_string(S) + ", D=" + std::to_string(D) + " (N=" + std::to_string(heads) +
              " heads) needs up to " + format_bytes(static_cast<double>(need)) + " of memory, more than the " +
              format_bytes(static_cast<double>(limit.bytes)) + " available (" + limit.source + ")",
          "use a smaller --seq or --head-dim");
}

// `--device cuda` hands the remaining arguments to `cpsim bench gpu_attention` (CUDA builds only).
std::string take_device(std::vector<std::string>& args) {
  std::string device = "cpu";
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i].rfind("--device=", 0) == 0) {
      device = args[i].substr(9);
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
    if (args[i] == "--device") {
      require(i + 1 < args.size(), "--device needs a value", "use --device cpu or --device cuda");
      device = args[i + 1];
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i), args.begin() + static_cast<std::ptrdiff_t>(i) + 2);
      break;
    }
  }
  return device;
}

int bench_attention(const std::vector<std::string>& all_args) {
  std::vector<std::string> args = all_args;
  const std::string device = take_device(args);
  if (device == "cuda") {
    const auto it = benches().find("gpu_attention");
    require(it != benches().end(), "--device cuda needs the CUDA backend, which this build does not have",
            "configure with -DCPSIM_WITH_CUDA=ON where nvcc and NCCL are installed, or use --device cpu");
    return it->second.fn(args);
  }
  require(device == "cpu", "--device must be cpu or cuda (got '" + device + "')", "use --device cpu");
  po::options_description desc("cpsim bench attention options");
  std::vector<std::int64_t> seqs{1024, 4096, 16384}, dims{64, 128};
  std::string dtype_s = "f32";
  int tile = CpuDevice::kDefaultTile;
  bool json = false;
  desc.add_options()                                                                                     //
      ("seq", po::value(&seqs)->multitoken(), "sequence lengths (default 1024 4096 16384)")              //
      ("head-dim", po::value(&dims)->multitoken(), "head dimensions (default 64 128)")                   //
      ("dtype", po::value(&dtype_s)->default_value("f32"), "f32 or f64")                                 //
      ("tile", po::value(&tile)->default_value(CpuDevice::kDefaultTile), "rows per query and key tile")  //
      ("json", po::bool_switch(&json), "print one JSON object")                                          //
      ("device", "cpu (this kernel) or cuda (the same as `cpsim bench gpu_attention`, CUDA builds)");
  po::variables_map vm;
  if (!parse("bench attention", desc, args, vm)) return 0;
  const DType dtype = parse_dtype(dtype_s);
  require(dtype != DType::bf16, "bf16 needs a GPU device", "use --dtype f32 or f64");
  require(tile >= 1, "the tile must hold at least one row", "use --tile " + std::to_string(CpuDevice::kDefaultTile));
  for (auto s : seqs)
    require(s >= 1, "every --seq must be at least 1 (got " + std::to_string(s) + ")", "use --seq 4096");
  for (auto d : dims)
    require(d >= 1, "every --head-dim must be at least 1 (got " + std::to_string(d) + ")", "use --head-dim 128");

  auto gemm = [&](std::int64_t d) {
    return dtype == DType::f32 ? gemm_gflops<float>(tile, d) : gemm_gflops<double>(tile, d);
  };
  auto heads_at = [](std::int64_t s) { return std::max<std::int64_t>(1, 8192 / s); };  // about the same work
  for (auto s : seqs)
    for (auto d : dims) check_point_memory(s, d, heads_at(s), tile);  // every point, before the first runs
  std::vector<Point> points;
  for (auto s : seqs)
    for (auto d : dims) {
      const std::int64_t heads = heads_at(s);
      const double before = gemm(d);
      Point p = measure(s, d, heads, dtype, tile);
      p.gemm = (before + gemm(d)) / 2;
      points.push_back(p);
    }
  bool met = true, any = false;
  for (const Point& p : points)
    if (p.seq >= kGoalFromSeq) {
      any = true;
      met = met && p.fwd_gflops() >= kForwardGoal * p.gemm && p.bwd_gflops() >= kBackwardGoal * p.gemm;
    }

  if (json) {
    Json pts = Json::array();
    for (const Point& p : points)
      pts.push_back({{"seq", p.seq},
                     {"head_dim", p.d},
                     {"heads", p.heads},
                     {"gemm_gflops", p.gemm},
                     {"fwd_cpu_seconds", p.fwd_s},
                     {"fwd_gflops", p.fwd_gflops()},
                     {"fwd_ratio", p.fwd_gflops() / p.gemm},
                     {"bwd_cpu_seconds", p.bwd_s},
                     {"bwd_gflops", p.bwd_gflops()},
                     {"bwd_ratio", p.bwd_gflops() / p.gemm}});
    const Json j{{"bench", "attention"},
                 {"dtype", dtype_name(dtype)},
                 {"causal", true},
                 {"batch", 1},
                 {"tile", tile},
                 {"threads", 1},
                 {"clock", "thread_cpu"},
                 {"points", std::move(pts)},
                 {"goal",
                  {{"from_seq", kGoalFromSeq},
                   {"fwd_ratio", kForwardGoal},
                   {"bwd_ratio", kBackwardGoal},
                   {"met", any ? Json(met) : Json()}}}};
    std::cout << json_text(j) << "\n";
    return 0;
  }
  fmt::printf("tiled attention, %s, causal, B=1, one thread, tile %d; times in thread CPU time\n",
              std::string(dtype_name(dtype)).c_str(), tile);
  fmt::printf("gemm: Eigen's [%d x D] x [D x %d] and [%d x %d] x [%d x D], measured around each point\n", tile, tile,
              tile, tile, tile);
  fmt::printf("%7s %5s %6s %9s %10s %10s %9s %10s %10s %9s\n", "S", "D", "heads", "gemm GF/s", "fwd ms", "fwd GF/s",
              "fwd/gemm", "bwd ms", "bwd GF/s", "bwd/gemm");
  for (const Point& p : points)
    fmt::printf("%7" PRId64 " %5" PRId64 " %6" PRId64 " %9.1f %10.1f %10.1f %9.2f %10.1f %10.1f %9.2f\n", p.seq, p.d,
                p.heads, p.gemm, p.fwd_s * 1e3, p.fwd_gflops(), p.fwd_gflops() / p.gemm, p.bwd_s * 1e3, p.bwd_gflops(),
                p.bwd_gflops() / p.gemm);
  if (any)
    fmt::printf("goal at S >= %" PRId64 ": forward >= %.2f x and backward >= %.2f x the GEMM rate: %s\n", kGoalFromSeq,
                kForwardGoal, kBackwardGoal, met ? "met" : "NOT met");
  return 0;
}

}  // namespace

CPSIM_BENCH(attention, "tiled kernel GFLOP/s beside Eigen's matrix product", bench_attention);

}  // namespace cpsim::cli
