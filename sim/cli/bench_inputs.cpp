// `cpsim bench inputs`: how fast the seeded inputs are made (sim/core/random.hpp). Per dtype, rounded_normals (the
// blocks every rank makes its shard with) beside the definition it must equal, one sample at a time through libm
// (round_to_dtype(normal_at(...))), measured in the same run; and whether the two agree bit for bit on every sample
// timed. Times are the benchmarking thread's CPU time (CLOCK_THREAD_CPUTIME_ID), the best of a few rounds: on a shared
// machine the time other processes hold the core is left out of both.
//
// The default count is one rank's q, k and v in the whole-run goal's shape (docs/performance/comm.md, "The whole
// run": 1024 rows of 8 heads of 64 on each of 4 ranks, three tensors).
#include <algorithm>
#include <bit>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/printf.h>

#include "sim/cli/cli.hpp"
#include "sim/core/error.hpp"
#include "sim/core/json.hpp"
#include "sim/core/random.hpp"
#include "sim/kernels/single_run.hpp"

namespace cpsim::cli {
namespace {

constexpr std::int64_t kDefaultSamples = 3 * 1024 * 8 * 64;
constexpr std::int64_t kMaxSamples = std::int64_t{1} << 25;  // two vectors of doubles: 512 MiB
constexpr int kFastRounds = 5, kLibmRounds = 3;

// The vector instructions this build may use (the flags it was compiled with).
const char* vector_isa() {
#if defined(__AVX512F__)
  return "AVX-512";
#elif defined(__AVX2__)
  return "AVX2";
#elif defined(__SSE2__)
  return "SSE2";
#else
  return "none";
#endif
}

struct Row {
  DType dtype;
  double fast_ns = 0, libm_ns = 0;  // thread CPU time per sample, best round
  std::int64_t differing = 0;       // samples whose bits differ between the two
};

// Seconds of thread CPU time of the fastest of `rounds` calls of f, after one untimed call (which touches the
// buffers' fresh pages).
template <class F>
double best_seconds(int rounds, F&& f) {
  f();
  double best = 1e300;
  for (int r = 0; r < rounds; ++r) {
    const double t0 = thread_cpu_seconds();
    f();
    best = std::min(best, thread_cpu_seconds() - t0);
  }
  return best;
}

Row measure(DType t, std::int64_t n) {
  const auto count = static_cast<std::size_t>(n);
  std::vector<double> fast(count), slow(count);
  const std::uint64_t seed = 1, stream = 0;
  Row row{t};
  row.fast_ns = best_seconds(kFastRounds, [&] { rounded_normals(seed, stream, 0, count, t, fast.data()); }) * 1e9 /
                static_cast<double>(n);
  row.libm_ns = best_seconds(kLibmRounds,
                             [&] {
                               for (std::size_t i = 0; i < count; ++i)
                                 slow[i] = round_to_dtype(normal_at(seed, stream, i), t);
                             }) *
                1e9 / static_cast<double>(n);
  for (std::size_t i = 0; i < count; ++i)
    row.differing += std::bit_cast<std::uint64_t>(fast[i]) != std::bit_cast<std::uint64_t>(slow[i]);
  return row;
}

void print_table(const std::vector<Row>& rows, std::int64_t samples) {
  fmt::printf(
      "seeded inputs: %lld samples per dtype, one thread, built for %s; thread CPU time, best of %d (fast) "
      "and %d (libm) rounds, after an untimed one\n",
      static_cast<long long>(samples), vector_isa(), kFastRounds, kLibmRounds);
  fmt::printf(
      "fast: rounded_normals, blocks of samples (what ranks make their shards with); libm: "
      "round_to_dtype(normal_at(...)), one at a time\n");
  fmt::printf("%5s %14s %14s %8s %12s %s\n", "dtype", "fast ns/sample", "libm ns/sample", "speedup", "fast ms",
              "values");
  for (const Row& r : rows) {
    const std::string same = r.differing == 0 ? "the same bits" : std::to_string(r.differing) + " DIFFER";
    fmt::printf("%5s %14.2f %14.2f %7.1fx %12.2f %s\n", std::string(dtype_name(r.dtype)).c_str(), r.fast_ns, r.libm_ns,
                r.libm_ns / r.fast_ns, r.fast_ns * static_cast<double>(samples) / 1e6, same.c_str());
  }
}

int bench_inputs(const std::vector<std::string>& args) {
  po::options_description desc("cpsim bench inputs options");
  std::int64_t samples = kDefaultSamples;
  bool json = false;
  desc.add_options()                                                                                //
      ("samples", size_value("samples", &samples)->default_value(std::to_string(kDefaultSamples)),  //
       size_help(
           "samples per dtype (by default one rank's q, k and v of `cpsim run --seq 4096 --heads 8 --head-dim 64`)")
           .c_str())  //
      ("json", po::bool_switch(&json), "print one JSON object");
  po::variables_map vm;
  if (!parse("bench inputs", desc, args, vm)) return 0;
  require(samples >= 1 && samples <= kMaxSamples,
          "--samples must be within 1.." + std::to_string(kMaxSamples) + " (got " + std::to_string(samples) + ")",
          "use --samples " + std::to_string(kDefaultSamples));

  std::vector<Row> rows;
  for (DType t : {DType::f32, DType::bf16, DType::f64}) rows.push_back(measure(t, samples));

  if (json) {
    Json dtypes = Json::array();
    for (const Row& r : rows)
      dtypes.push_back({{"dtype", dtype_name(r.dtype)},
                        {"fast_ns_per_sample", r.fast_ns},
                        {"libm_ns_per_sample", r.libm_ns},
                        {"speedup", r.libm_ns / r.fast_ns},
                        {"differing", r.differing}});
    const Json j{{"bench", "inputs"},
                 {"samples", samples},
                 {"vector_isa", vector_isa()},
                 {"clock", "thread_cpu"},
                 {"dtypes", std::move(dtypes)}};
    std::cout << json_text(j) << "\n";
  } else {
    print_table(rows, samples);
  }
  for (const Row& r : rows)
    if (r.differing != 0) throw Error("rounded_normals differs from normal_at rounded to the dtype: a bug");
  return 0;
}

}  // namespace

CPSIM_BENCH(inputs, "how fast the seeded inputs are made, beside libm one sample at a time", bench_inputs);

}  // namespace cpsim::cli
