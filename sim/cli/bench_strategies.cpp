// cpsim bench strategies: forward and forward+backward time of every strategy against the single-process tiled
// kernel on one thread, measured in the same run, while S grows.
//
// A strategy's time is the slowest rank's forward (and backward) phase, as the recorder measured it: input
// generation and rank start-up are not counted, as on a real cluster where the inputs are already there.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>

#include <fmt/printf.h>

#include "sim/cli/cli.hpp"
#include "sim/cli/problem_options.hpp"
#include "sim/comm/launcher.hpp"
#include "sim/core/error.hpp"
#include "sim/core/json.hpp"
#include "sim/kernels/cpu_device.hpp"
#include "sim/kernels/single_run.hpp"
#include "sim/runtime/inputs.hpp"
#include "sim/runtime/memory_need.hpp"
#include "sim/runtime/report.hpp"
#include "sim/runtime/trace.hpp"

namespace cpsim::cli {
namespace {

struct Timing {
  double fwd_ms = 0, bwd_ms = 0;
};

// The single-process tiled kernel on one thread, on the run's own inputs: the baseline every strategy is compared
// with (sim/kernels/single_run.hpp).
Timing single_process(const Problem& p, std::uint64_t seed) {
  const AttentionShape shape{p.batch, p.seq, p.seq, p.heads, p.kv_heads, p.head_dim};
  const AttentionProblem problem = attention_problem(shape, p.causal, p.dtype, seed, p.scale);
  Recorder rec;
  CpuDevice dev(rec);
  const SingleRun r = run_single_device(dev, problem, p.dtype);
  return {r.fwd_seconds * 1e3, r.bwd_seconds * 1e3};
}

// The fastest of `reps` calls of fn (forward+backward time); the machine may be shared, and the least disturbed
// run is the one closest to what the code costs.
template <class Fn>
Timing best_of(int reps, Fn&& fn) {
  Timing best = fn();
  for (int i = 1; i < reps; ++i) {
    const Timing t = fn();
    if (t.fwd_ms + t.bwd_ms < best.fwd_ms + best.bwd_ms) best = t;
  }
  return best;
}

Timing slowest_rank(const RunResult& r) {
  Timing t;
  for (const auto& rk : r.ranks) {
    const auto& ph = rk.stats.phase_us();
    if (auto it = ph.find("forward"); it != ph.end()) t.fwd_ms = std::max(t.fwd_ms, it->second / 1000);
    if (auto it = ph.find("backward"); it != ph.end()) t.bwd_ms = std::max(t.bwd_ms, it->second / 1000);
  }
  return t;
}

// --trace: the cost of recording. The run is timed untraced and traced, alternating, best of kTraceReps each; the
// trace is then written to memory (its size and the time to format it, which is not part of the run).
constexpr int kTraceReps = 3;
struct TraceCost {
  double off_ms = 1e300, on_ms = 1e300, write_ms = 0;
  std::size_t events = 0, busiest = 0, bytes = 0;  // events in all, on the rank with the most, trace bytes
};

TraceCost measure_trace(RunConfig c) {
  TraceCost m;
  for (int i = 0; i < kTraceReps; ++i)
    for (bool on : {false, true}) {
      c.tracing = on;
      const RunResult r = run(c);
      const Timing t = slowest_rank(r);
      double& best = on ? m.on_ms : m.off_ms;
      best = std::min(best, t.fwd_ms + t.bwd_ms);
      if (!on || i > 0) continue;
      for (const auto& rk : r.ranks) {
        m.events += rk.stats.events().size();
        m.busiest = std::max(m.busiest, rk.stats.events().size());
      }
      const auto t0 = std::chrono::steady_clock::now();
      m.bytes = trace_json(r).size();
      m.write_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
  return m;
}

// What one recorder call costs, as a device makes it (the spans are built whether tracing is on or not): recorders
// of 256 events, as many as a rank of a large run records, one after another, so memory is reused as in a run.
double recorder_call_ns(bool tracing) {
  constexpr int events = 256, recorders = 400;
  const auto t0 = std::chrono::steady_clock::now();
  for (int n = 0; n < recorders; ++n) {
    Recorder rec(0, tracing);
    rec.begin_phase("forward");
    rec.step(0);
    for (int i = 0; i < events; ++i)
      rec.work(WorkCounts{1, 0, 1, 0, 64, 4096}, BlockKind::full, {{0, 8}, {56, 64}}, {{0, 8}}, 0, 1,
               "attention_forward");
  }
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / (events * recorders);
}

constexpr int kMaxReps = 1000;

std::vector<std::int64_t> parse_list(const std::string& flag, const std::string& text) {
  std::vector<std::int64_t> out;
  for (const std::string& item : split_list(flag, text)) out.push_back(parse_size64(flag, item));
  require(!out.empty(), "--" + flag + " needs at least one value", "use --" + flag + " 1K,4K");
  return out;
}

int bench_strategies(const std::vector<std::string>& args) {
  po::options_description desc("cpsim bench strategies: every strategy's time against one process, as S grows");
  ProblemOptions o;
  o.heads = 8;
  o.head_dim = 64;
  o.dtype = "f32";
  std::string seqs = "1K,4K,16K", strategies = "all_gather,ulysses,ring,hybrid";
  int reps = 2;
  // Every flag of the table but those this benchmark sets itself: --strategies and --seqs sweep, and every run is
  // forward and backward.
  add_problem_options(desc, o, kAllProblemFlags & ~(kFlagStrategy | kFlagSeq | kFlagBackward));
  desc.add_options()("seqs", po::value(&seqs)->default_value(seqs), "sequence lengths to sweep (K = 1024)")(
      "strategies", po::value(&strategies)->default_value(strategies), "comma-separated strategies")(
      "reps", po::value(&reps)->default_value(reps),
      "timed runs per point after one untimed warm-up run; the best is reported")("json", "print one JSON object")(
      "trace", "also measure what recording a trace costs: each run untraced and traced, best of 3 each");
  po::variables_map vm;
  if (!parse("bench strategies", desc, args, vm, {{"seq", "seqs"}, {"strategy", "strategies"}})) return 0;
  // Under mpirun (--backend mpi) rank 0 reports; the job's other processes print nothing.
  const bool reporting = launcher_rank() <= 0;
  if (!reporting && std::freopen("/dev/null", "w", stdout) == nullptr) throw Error("cannot silence stdout");
  std::ostream null_stream(nullptr);
  std::ostream& progress = reporting ? std::cerr : null_stream;
  const auto seq_list = parse_list("seqs", seqs);
  require(reps >= 1 && reps <= kMaxReps,
          "--reps must be 1 to " + std::to_string(kMaxReps) + " (got " + std::to_string(reps) + ")", "use --reps 2");
  std::vector<StrategyKind> kinds;
  for (const std::string& s : split_list("strategies", strategies)) kinds.push_back(parse_strategy(s));
  require(!kinds.empty(), "--strategies lists no strategy", "use --strategies ring,ulysses");
  auto listed = [&](std::initializer_list<StrategyKind> ks) {
    for (StrategyKind k : kinds)
      for (StrategyKind want : ks) if (k == want) return true;
    return false;
  };
  require(o.a2a == 0 || listed({StrategyKind::hybrid}),
          "--a2a sets the hybrid's A2A group size, and --strategies has no hybrid", "add hybrid or drop --a2a");
  require(!vm.count("kv-replicate") || listed({StrategyKind::ulysses, StrategyKind::hybrid}),
          "--kv-replicate copies KV heads in the all-to-all strategies, and --strategies lists neither ulysses nor "
          "hybrid",
          "add one of them or drop --kv-replicate");
  // Validate every configuration, and that the memory holds it, before measuring anything. --a2a is the hybrid's,
  // --kv-replicate goes to the runs whose A2A group cannot split the KV heads (at least one must need it).
  std::vector<RunConfig> configs;
  bool replicated = false;
  for (auto S : seq_list)
    for (StrategyKind k : kinds) {
      ProblemOptions x = o;
      x.seq = S;
      x.strategy = std::string(strategy_name(k));
      if (k != StrategyKind::hybrid) x.a2a = 0;
      RunConfig c;
      apply_problem_options(x, vm, kAllProblemFlags, c);
      c.problem.kv_replicate = c.problem.kv_replicate && (k == StrategyKind::ulysses || k == StrategyKind::hybrid) &&
                               c.problem.kv_heads % c.problem.a2a_size(k) != 0;
      replicated = replicated || c.problem.kv_replicate;
      c.backward = true;
      check_config(c);  // the problem, the backend and the kernel, before any run
      check_memory(c);
      const Problem& p = c.problem;
      check_single_device_memory({p.batch, p.seq, p.seq, p.heads, p.kv_heads, p.head_dim}, p.dtype, true, false,
                                 c.memory_limit);
      configs.push_back(c);
    }
  if (vm.count("kv-replicate") && !replicated) {
    RunConfig c = configs[0];
    c.strategy = listed({StrategyKind::ulysses}) ? StrategyKind::ulysses : StrategyKind::hybrid;
    c.problem.a2a = c.strategy == StrategyKind::hybrid ? o.a2a : 0;
    c.problem.kv_replicate = true;
    check_kv_replicate(c);  // names why no run here needs it
  }
  const bool json = vm.count("json") > 0, trace = vm.count("trace") > 0;
  Json j{{"config",
          {{"ranks", o.ranks},
           {"batch", o.batch},
           {"heads", o.heads},
           {"kv_heads", configs[0].problem.kv_heads},
           {"head_dim", o.head_dim},
           {"dtype", o.dtype},
           {"sharding", o.sharding},
           {"backend", o.backend},
           {"reps", reps},
           {"warm_up_runs", 1}}}};
  double off_ns = 0, on_ns = 0;
  if (trace) {
    off_ns = recorder_call_ns(false);
    on_ns = recorder_call_ns(true);
    j["recorder_call_ns"] = {{"tracing_off", off_ns}, {"tracing_on", on_ns}};
    if (!json)
      fmt::printf("One recorder call (an attention block as the device records it): %.0f ns with tracing off, %.0f ns "
                  "with tracing on\n\n", off_ns, on_ns);
  }
  Json& results = j["results"] = Json::array();
  if (!json)
    std::cout << "Strategies on " << o.ranks << " " << o.backend << " ranks, " << o.sharding << ", B=" << o.batch
              << " Nq=" << o.heads << " Nkv=" << configs[0].problem.kv_heads << " D=" << o.head_dim << " " << o.dtype
              << "; time = slowest rank, best of " << reps
              << " runs after a warm-up; baseline = single-process tiled kernel, one thread, same run\n\n"
              << "      S  strategy       fwd ms   fwd+bwd ms  x baseline  pairs/rank(max)  sent/rank(max)\n";
  std::size_t idx = 0;
  for (auto S : seq_list) {
    Problem base = configs[idx].problem;
    base.seq = S;
    progress << "[bench strategies] S=" << S << ": single-process baseline...\n";
    Timing sp;  // under mpirun, measured by rank 0 while the job's other processes wait idle
    run_on_rank0([&] { sp = best_of(reps, [&] { return single_process(base, configs[idx].seed); }); });
    if (!json)
      fmt::printf("%7lld  %-13s %8.1f  %11.1f  %10s\n", static_cast<long long>(S), "1 process", sp.fwd_ms,
                  sp.fwd_ms + sp.bwd_ms, "1.00");
    results.push_back(
        {{"seq", S}, {"strategy", "single_process"}, {"fwd_ms", sp.fwd_ms}, {"fwd_bwd_ms", sp.fwd_ms + sp.bwd_ms}});
    for (std::size_t n = 0; n < kinds.size(); ++n, ++idx) {
      const RunConfig& c = configs[idx];
      progress << "[bench strategies] S=" << S << ": " << strategy_name(c.strategy) << " (" << n + 1 << "/"
               << kinds.size() << ")...\n";
      RunResult r = run(c);  // warm-up: the first run in a process faults its memory in
      const Timing t = best_of(reps, [&] {
        r = run(c);
        return slowest_rank(r);
      });
      std::int64_t pairs = 0, sent = 0;
      for (const auto& rk : r.ranks) {
        pairs = std::max(pairs, rk.stats.total_work().pairs);
        sent = std::max(sent, rk.stats.comm_counts().bytes_sent);
      }
      const double ratio = (t.fwd_ms + t.bwd_ms) / (sp.fwd_ms + sp.bwd_ms);
      if (!json)
        fmt::printf("%7lld  %-13s %8.1f  %11.1f  %10.2f  %15lld  %14s\n", static_cast<long long>(S),
                    std::string(strategy_name(c.strategy)).c_str(), t.fwd_ms, t.fwd_ms + t.bwd_ms, ratio,
                    static_cast<long long>(pairs), format_bytes(static_cast<double>(sent)).c_str());
      Json row{{"seq", S},
               {"strategy", strategy_name(c.strategy)},
               {"fwd_ms", t.fwd_ms},
               {"fwd_bwd_ms", t.fwd_ms + t.bwd_ms},
               {"ratio_to_single", ratio},
               {"max_pairs_per_rank", pairs},
               {"max_bytes_sent_per_rank", sent}};
      if (trace) {
        progress << "[bench strategies] S=" << S << ": " << strategy_name(c.strategy) << ", untraced and traced x"
                 << kTraceReps << "...\n";
        const TraceCost m = measure_trace(c);
        // Measured: best traced against best untraced. Estimated: what the busiest rank spent recording events.
        const double overhead = 100 * (m.on_ms - m.off_ms) / m.off_ms;
        const double estimate = 100 * static_cast<double>(m.busiest) * (on_ns - off_ns) * 1e-6 / m.off_ms;
        if (!json)
          fmt::printf("%7s  %-13s untraced %.1f ms, traced %.1f ms (best of %d): %+.1f%%; recording %zu events on the "
                      "busiest rank: %+.2f%%; trace %s, formatted in %.1f ms\n", "", "  trace", m.off_ms, m.on_ms,
                      kTraceReps, overhead, m.busiest, estimate, format_bytes(static_cast<double>(m.bytes)).c_str(),
                      m.write_ms);
        row["trace"] = {{"untraced_ms", m.off_ms},
                        {"traced_ms", m.on_ms},
                        {"overhead_percent", overhead},
                        {"recording_percent", estimate},
                        {"events", static_cast<std::int64_t>(m.events)},
                        {"events_busiest_rank", static_cast<std::int64_t>(m.busiest)},
                        {"bytes", static_cast<std::int64_t>(m.bytes)},
                        {"format_ms", m.write_ms}};
      }
      results.push_back(std::move(row));
    }
  }
  if (json) std::cout << json_text(j) << "\n";
  return 0;
}

}  // namespace
CPSIM_BENCH(strategies, "every strategy's forward and forward+backward time against one process", bench_strategies);
}  // namespace cpsim::cli
