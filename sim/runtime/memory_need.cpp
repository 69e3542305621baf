#include "sim/runtime/memory_need.hpp"

#include <algorithm>
#include <numeric>

#include "sim/comm/backend_registry.hpp"
#include "sim/comm/launch_support.hpp"
#include "sim/comm/launcher.hpp"
#include "sim/core/error.hpp"
#include "sim/core/sizes.hpp"
#include "sim/kernels/device_registry.hpp"
#include "sim/kernels/host_pool.hpp"
#include "sim/layout/layout.hpp"
#include "sim/model/count_run.hpp"

namespace cpsim {
namespace {

constexpr std::int64_t kDouble = 8;

// Element counts of the whole problem: q, dout, out, dq [B, S, Nq, D]; k, v, dk, dv [B, S, Nkv, D]; lse [B, Nq, S].
struct Counts {
  std::int64_t q, k, lse;
};

Counts whole_counts(const Problem& p) {
  return {p.batch * p.seq * p.heads * p.head_dim, p.batch * p.seq * p.kv_heads * p.head_dim,
          p.batch * p.heads * p.seq};
}

// The check's host copies (check.cpp: the reference in double, and for f32 the plain loops; naive.hpp converts its
// inputs and returns its results as doubles), at the largest stage, with the results it keeps until the end.
std::int64_t check_bytes(const Counts& n, DType dtype, bool backward) {
  const std::int64_t fwd_stage = (n.q + 2 * n.k) + 2 * (n.q + n.lse);           // inputs as T, out/lse as T and double
  const std::int64_t bwd_stage = (2 * n.q + 2 * n.k) + 2 * (n.q + 2 * n.k);      // q, k, v, dout; dq, dk, dv twice
  const std::int64_t kept = (n.q + n.lse) + (backward ? n.q + 2 * n.k : 0);      // the reference's results
  const std::int64_t plain = dtype == DType::f32 ? kept : 0;                     // the plain f32 loops' results
  return kDouble * (kept + plain + std::max(fwd_stage, backward ? bwd_stage : 0));
}

// What run() holds after the ranks (run.cpp): the results as the ranks sent them and deserialised, and the
// gathered results; the global inputs where they are kept (--check, --dump); with the check, a second copy of the
// inputs (whole_problem) and check_bytes.
std::int64_t caller_bytes(const RunConfig& cfg) {
  const Problem& p = cfg.problem;
  const Counts n = whole_counts(p);
  const std::int64_t inputs = n.q + 2 * n.k + (cfg.backward ? n.q : 0);
  // No results come back from a run that keeps no outputs (RunConfig::keep_outputs; a check keeps them).
  const bool outputs = cfg.keep_outputs || cfg.check;
  const std::int64_t results = outputs ? n.q + n.lse + (cfg.backward ? n.q + 2 * n.k : 0) : 0;
  const std::int64_t making = std::max(n.q, n.k);  // one tensor's values while the seeded inputs are made
  const bool kept = cfg.check || cfg.keep_inputs;
  const std::int64_t gather = kDouble * (3 * results + (kept ? inputs + making : 0));
  if (!cfg.check) return gather;
  const std::int64_t check = kDouble * (2 * results + 2 * inputs) + check_bytes(n, p.dtype, cfg.backward);
  return std::max(gather, check);
}

// One rank's host memory beside its device (rank_run.cpp). Its inputs go straight into its device buffers (the
// CPU device's own memory, counted as its device peak; a GPU's staging of one tensor in its dtype is less than
// what follows). Its results are downloaded as doubles (a tensor in the dtype on its way), then serialised into
// one buffer of their exact size while the doubles are still held: the most at once, 2 x 8 bytes per result
// element, plus the LSE's position runs (a few per rank) and the headers.
std::int64_t rank_host_bytes(const RunConfig& cfg) {
  const Problem& p = cfg.problem;
  const std::int64_t s = p.seq / p.ranks;
  const std::int64_t q = p.batch * s * p.heads * p.head_dim, k = p.batch * s * p.kv_heads * p.head_dim;
  const std::int64_t lse = p.batch * p.heads * s;
  const bool outputs = cfg.keep_outputs || cfg.check;  // else nothing is downloaded or sent (rank_run.cpp)
  const std::int64_t results = outputs ? q + lse + (cfg.backward ? q + 2 * k : 0) : 0;
  constexpr std::int64_t kHeaders = 4096;  // the serialised lengths, heads and position runs
  return 2 * kDouble * results + kHeaders;
}

bool in_process(Backend b) { return b == Backend::threads || b == Backend::cuda_threads; }

// Under mpirun the ranks on this machine (Open MPI, MPICH and PMI say how many); elsewhere all of them.
int ranks_on_this_machine(const RunConfig& cfg) {
  if (cfg.backend != Backend::mpi) return cfg.problem.ranks;
  const int local = env_int({"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE"});
  return local > 0 ? std::min(local, cfg.problem.ranks) : cfg.problem.ranks;
}

// Each rank's device peaks, from the counting device: at S itself, or, where a counting run at S would take long
// (its position lists hold C x S entries in all), at a shorter S0 of the same layout, scaled by S / S0. Every buffer
// a strategy allocates is [B, S/C or S, N, D] or [B, N, S/C or S] (the gathered, exchanged and received blocks are
// fractions of S too), so each rank's peaks are linear in S and the scaled count is exact (memory_need_test.cpp).
constexpr std::int64_t kCountedTokens = std::int64_t{1} << 20;  // C x S0 at most

// The device peaks of every rank of a counting run (sim/model/count_run.hpp), in all and of message buffers.
struct DevicePeaks {
  std::vector<std::int64_t> all, message;  // per rank
};

DevicePeaks counted_peaks(const ValidProblem& valid, bool backward) {
  model::CountOptions opt;
  opt.backward = backward;
  opt.step_work = false;  // the peaks only
  const model::CountResult r = model::count_run(valid, opt);
  DevicePeaks peaks;
  for (const Recorder& rec : r.ranks) {
    peaks.all.push_back(rec.peak_bytes());
    peaks.message.push_back(rec.message_peak_bytes());
  }
  return peaks;
}

DevicePeaks device_peaks(const RunConfig& cfg, const ValidProblem& valid) {
  const Problem& p = valid.problem();
  const std::int64_t step = p.sharding == Sharding::zigzag ? 2 * p.ranks : p.ranks;
  const std::int64_t s0 = std::max(step, kCountedTokens / p.ranks / step * step);
  if (p.seq <= s0) return counted_peaks(valid, cfg.backward);
  Problem shorter = p;
  shorter.seq = s0;
  DevicePeaks peaks = counted_peaks(validated(shorter, valid.kind()), cfg.backward);
  for (auto* v : {&peaks.all, &peaks.message})
    for (std::int64_t& b : *v) b = static_cast<std::int64_t>(static_cast<__int128>(b) * p.seq / s0);
  return peaks;
}

void sum_up(const RunConfig& cfg, MemoryNeed& m) {
  const int C = cfg.problem.ranks;
  std::vector<std::int64_t> ranks;
  for (int r = 0; r < C; ++r) ranks.push_back(m.rank_peak(r));
  std::sort(ranks.rbegin(), ranks.rend());
  const int here = ranks_on_this_machine(cfg);
  const std::int64_t ranks_here = total_bytes("the ranks' memory", std::vector<std::int64_t>(ranks.begin(), ranks.begin() + here));
  std::int64_t device_sum = 0;
  for (std::int64_t d : m.device_peak) device_sum += d;
  // Blocks the CPU devices gave back stay cached (at most host_pool::kMaxCachedBytes) while the caller works.
  const std::int64_t cached =
      m.device_on_host && in_process(cfg.backend)
          ? std::min<std::int64_t>(device_sum, static_cast<std::int64_t>(host_pool::kMaxCachedBytes))
          : 0;
  m.total = std::max(ranks_here, total_bytes("the run's memory", {m.caller, cached}));
  m.largest_process = m.ranks_in_process ? m.total : std::max(ranks.empty() ? 0 : ranks[0], m.caller);
}

}  // namespace

std::int64_t MemoryNeed::rank_peak(int rank) const {
  const std::int64_t device = device_peak.empty() ? 0 : device_peak[static_cast<std::size_t>(rank)];
  return rank_host + (device_on_host ? device : 0);
}

std::int64_t MemoryNeed::max_rank_peak() const {
  std::int64_t m = 0;
  for (std::size_t r = 0; r < std::max<std::size_t>(1, device_peak.size()); ++r)
    m = std::max(m, rank_peak(static_cast<int>(r)));
  return m;
}

MemoryNeed memory_need(const RunConfig& cfg, std::int64_t within) {
  return memory_need(cfg, validated(cfg.problem, cfg.strategy), within);
}

MemoryNeed memory_need(const RunConfig& cfg, const ValidProblem& valid, std::int64_t within) {
  MemoryNeed m;
  m.device_on_host = !device_info(built_in_backend(cfg.backend).device).gpu;
  m.ranks_in_process = in_process(cfg.backend);
  m.caller = caller_bytes(cfg);
  m.rank_host = rank_host_bytes(cfg);
  if (m.caller > within) {  // beyond the limit whatever the ranks hold: not worth counting them
    m.lower_bound = true;
    m.total = m.largest_process = m.caller;
    return m;
  }
  DevicePeaks peaks = device_peaks(cfg, valid);
  m.device_peak = std::move(peaks.all);
  m.message_peak = std::move(peaks.message);
  sum_up(cfg, m);
  return m;
}

HostMemory memory_limits(const RunConfig& cfg) {
  if (cfg.memory_limit > 0) {
    const MemoryLimit given{cfg.memory_limit, "--memory-limit"};
    return {given, given};
  }
  return host_memory();
}

namespace {

bool fits(const MemoryNeed& m, const HostMemory& lim) {
  return !m.lower_bound && m.total <= lim.machine.bytes && m.largest_process <= lim.process.bytes;
}

bool fits(const RunConfig& cfg, const HostMemory& lim) {
  try {
    return fits(memory_need(cfg, lim.machine.bytes), lim);
  } catch (const UsageError&) {
    return false;  // a change the configuration does not allow
  }
}

// The longest sequence, a multiple of what the layout needs, that fits; 0 when none does.
std::int64_t fitting_seq(RunConfig c, const MemoryNeed& need, const HostMemory& lim) {
  const std::int64_t step = c.problem.sharding == Sharding::zigzag ? 2 * c.problem.ranks : c.problem.ranks;
  double ratio = std::min(static_cast<double>(lim.machine.bytes) / static_cast<double>(need.total),
                          static_cast<double>(lim.process.bytes) / static_cast<double>(need.largest_process));
  for (int tries = 0; tries < 4; ++tries) {
    const auto s = static_cast<std::int64_t>(static_cast<double>(c.problem.seq) * ratio * 0.98) / step * step;
    if (s < step || s >= c.problem.seq) return 0;
    c.problem.seq = s;
    if (fits(c, lim)) return s;
    ratio = 0.7;  // the need is nearly linear in S: a few shorter tries find it
  }
  return 0;
}

// The last way out of a memory refusal, where the program has --memory-limit.
Fix set_limit() { return Fix{{"set the limit with --memory-limit BYTES"}, "", ", or ", ""}; }

std::string need_words(const RunConfig& cfg, const MemoryNeed& m) {
  if (m.lower_bound)
    return "at least " + format_bytes(static_cast<double>(m.total)) + " of memory (to gather" +
           (cfg.check ? " and check" : "") + " the results, before its ranks are counted)";
  const std::string ranks = std::to_string(cfg.problem.ranks) + (cfg.problem.ranks == 1 ? " rank" : " ranks") +
                            " of up to " + format_bytes(static_cast<double>(m.max_rank_peak()));
  return format_bytes(static_cast<double>(m.total)) + " of memory (" + ranks + ", then " +
         format_bytes(static_cast<double>(m.caller)) + " to gather" + (cfg.check ? " and check" : "") +
         " the results)";
}

}  // namespace

MemoryNeed check_memory(const RunConfig& cfg) { return check_memory(cfg, validated(cfg.problem, cfg.strategy)); }

MemoryNeed check_memory(const RunConfig& cfg, const ValidProblem& valid) {
  if (cfg.backend == Backend::mpi && launcher_rank() > 0) return {};  // rank 0 checks; it ends the job if it refuses
  const HostMemory lim = memory_limits(cfg);
  const MemoryNeed m = memory_need(cfg, valid, lim.machine.bytes);
  if (fits(m, lim)) return m;

  const bool machine_bound = m.lower_bound || m.total > lim.machine.bytes;
  const MemoryLimit& bound = machine_bound ? lim.machine : lim.process;
  std::string what = machine_bound ? "the run needs " + need_words(cfg, m)
                                   : "one process of the run needs " +
                                         format_bytes(static_cast<double>(m.largest_process));
  what += ", more than the " + format_bytes(static_cast<double>(bound.bytes)) + " " +
          (bound.source == "--memory-limit" ? "that --memory-limit allows"
                                            : "available (" + bound.source + ")");

  // Fixes that make this run fit, apart for the program to word in its flags.
  std::vector<std::string> fixes;
  if (const std::int64_t s = fitting_seq(cfg, m, lim); s > 0) fixes.push_back("--seq " + std::to_string(s));
  if (cfg.strategy == StrategyKind::all_gather) {
    RunConfig c = cfg;
    c.strategy = StrategyKind::ring;
    if (fits(c, lim)) fixes.push_back("--strategy ring");
  }
  if (cfg.problem.dtype == DType::f64) {
    RunConfig c = cfg;
    c.problem.dtype = DType::f32;
    if (fits(c, lim)) fixes.push_back("--dtype f32");
  }
  std::vector<std::string> drop_check;
  if (cfg.check) {
    RunConfig c = cfg;
    c.check = false;
    if (fits(c, lim)) drop_check.emplace_back("drop --check");
  }
  throw UsageError(what, {Fix{fixes}, Fix{drop_check, "", ", ", ""}, set_limit()}, "use a smaller shape");
}

std::int64_t single_device_peak(const AttentionShape& sh, DType dtype, bool backward) {
  const std::int64_t q = sh.B * sh.Sq * sh.Nq * sh.D, k = sh.B * sh.Sk * sh.Nkv * sh.D, lse = sh.B * sh.Nq * sh.Sq;
  // single_run.cpp: q, k, v, out, lse, and dout, dq, dk, dv for the backward, in the dtype.
  return static_cast<std::int64_t>(dtype_size(dtype)) * ((q + 2 * k + q + lse) + (backward ? 2 * q + 2 * k : 0));
}

std::int64_t single_device_need(const AttentionShape& sh, DType dtype, bool backward, bool check) {
  const std::int64_t q = sh.B * sh.Sq * sh.Nq * sh.D, k = sh.B * sh.Sk * sh.Nkv * sh.D, lse = sh.B * sh.Nq * sh.Sq;
  const std::int64_t device = single_device_peak(sh, dtype, backward);
  // The seeded inputs as doubles (attention_problem makes dout too), and the results as doubles.
  const std::int64_t host = kDouble * ((2 * q + 2 * k) + (q + lse) + (backward ? q + 2 * k : 0) + std::max(q, k));
  const std::int64_t checking = check ? check_bytes({q, k, lse}, dtype, backward) : 0;
  return total_bytes("the attention's memory", {device, host, checking});
}

void check_single_device_memory(const AttentionShape& sh, DType dtype, bool backward, bool check,
                                std::int64_t limit) {
  const HostMemory lim = limit > 0 ? HostMemory{{limit, "--memory-limit"}, {limit, "--memory-limit"}} : host_memory();
  const std::int64_t need = single_device_need(sh, dtype, backward, check);
  const MemoryLimit& bound = lim.process.bytes < lim.machine.bytes ? lim.process : lim.machine;
  if (need <= bound.bytes) return;
  std::vector<std::string> fixes;
  const double ratio = static_cast<double>(bound.bytes) / static_cast<double>(need);
  if (const auto s = static_cast<std::int64_t>(static_cast<double>(sh.Sq) * ratio * 0.9); s >= 1 && s < sh.Sq)
    fixes.push_back("--seq " + std::to_string(s));
  if (dtype == DType::f64 && single_device_need(sh, DType::f32, backward, check) <= bound.bytes)
    fixes.push_back("--dtype f32");
  throw UsageError(
      "the attention needs " + format_bytes(static_cast<double>(need)) + " of memory, more than the " +
          format_bytes(static_cast<double>(bound.bytes)) + " " +
          (bound.source == "--memory-limit" ? "that --memory-limit allows" : "available (" + bound.source + ")"),
      {Fix{fixes}, set_limit()}, "use a smaller shape");
}

}  // namespace cpsim
