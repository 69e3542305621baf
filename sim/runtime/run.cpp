#include "sim/runtime/run.hpp"

#include <algorithm>

#include "sim/comm/backend_registry.hpp"
#include "sim/core/error.hpp"
#include "sim/kernels/device_registry.hpp"
#include "sim/runtime/inputs.hpp"
#include "sim/runtime/memory_need.hpp"
#include "sim/runtime/mpi_runs.hpp"
#include "sim/runtime/rank_run.hpp"

namespace cpsim {

namespace {

// "a, b or c".
std::string one_of(const std::vector<std::string>& names) {
  std::string s;
  for (std::size_t i = 0; i < names.size(); ++i) s += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return s;
}

// The backend must be built in, and its device must compute in the problem's dtype and implement its mask.
void check_backend(const RunConfig& cfg) {
  const std::string& device = built_in_backend(cfg.backend).device;
  const DeviceInfo& info = device_info(device);
  if (!info.any_mask) {
    const Mask mask = cfg.problem.mask();
    require(mask.plain(), "the " + device + " device implements the causal and full masks, not " + mask.describe(),
            Fix{{"--backend threads or processes for documents and windows"}});
  }
  if (computes_in(info, cfg.problem.dtype)) return;
  std::vector<std::string> fix;
  for (DType t : info.dtypes) fix.emplace_back(dtype_name(t));
  const std::string dtype(dtype_name(cfg.problem.dtype));
  throw UsageError(cfg.problem.dtype == DType::bf16 ? std::string("bf16 needs a GPU device")
                                                    : dtype + " is not computed by the " + device + " device",
                   {Fix{{"--dtype " + one_of(fix) + " on the " + std::string(backend_name(cfg.backend)) + " backend"}}});
}

// The backend's device must offer the kernels asked for (--kernel), and they must take the problem.
void check_kernel(const RunConfig& cfg) {
  const std::string& kernel = cfg.device.kernel;
  if (kernel == "auto") return;
  const DeviceInfo& info = device_info(built_in_backend(cfg.backend).device);
  if (offers_kernel(info, kernel)) {
    const Problem& p = cfg.problem;
    if (info.kernel_problem)
      if (const std::optional<UsageError> why = info.kernel_problem(kernel, p.dtype, p.head_dim)) throw *why;
    return;
  }
  if (!info.kernels.empty()) {
    std::vector<std::string> names{"auto"};
    names.insert(names.end(), info.kernels.begin(), info.kernels.end());
    throw UsageError("unknown --kernel '" + kernel + "'; use " + one_of(names));
  }
  std::vector<std::string> choosing;  // the built-in backends whose device offers a choice of kernels
  for (Backend b : built_in_backends())
    if (!device_info(built_in_backend(b).device).kernels.empty()) choosing.emplace_back(backend_name(b));
  const std::string backend(backend_name(cfg.backend));
  const std::string why = "--kernel chooses among a device's attention kernels, and the " + info.name +
                          " device of --backend " + backend + " has no choice (got --kernel " + kernel + ")";
  std::vector<std::string> ways;
  if (!choosing.empty()) ways.push_back("--backend " + one_of(choosing) + ", or leave --kernel out");
  throw UsageError(why, {Fix{ways, "leave --kernel out (no device of this build offers a choice)"}});
}

// x's [B, nh, n] LSE, for heads [h0, h0 + nh) at the n listed positions, into lse [B, Nq, S].
void place_lse(const Problem& p, const RankResult& x, std::vector<double>& lse) {
  const std::vector<std::int64_t> pos = x.lse_positions.expand();
  const auto n = static_cast<std::int64_t>(pos.size());
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < x.lse_heads; ++h)
      for (std::int64_t i = 0; i < n; ++i)
        lse[static_cast<std::size_t>((b * p.heads + x.lse_head0 + h) * p.seq + pos[static_cast<std::size_t>(i)])] =
            x.lse[static_cast<std::size_t>((b * x.lse_heads + h) * n + i)];
}

}  // namespace

GlobalTensors make_inputs(const RunConfig& cfg) {
  Inputs in = global_inputs(cfg.problem, cfg.seed, cfg.backward);
  GlobalTensors t;
  t.q = std::move(in.q);
  t.k = std::move(in.k);
  t.v = std::move(in.v);
  t.dout = std::move(in.dout);
  return t;
}

ValidProblem check_config(const RunConfig& cfg) {
  ValidProblem valid = validated(cfg.problem, cfg.strategy);
  check_backend(cfg);
  check_kernel(cfg);
  return valid;
}

RunResult run(const RunConfig& cfg) { return run(cfg, check_config(cfg)); }

RunResult run(const RunConfig& cfg, const ValidProblem& valid) {
  const Problem& p = valid.problem();
  RunResult result;
  result.config = cfg;

  LaunchOptions opt;
  opt.ranks = p.ranks;
  opt.backend = cfg.backend;
  opt.timeout = cfg.timeout;
  opt.tracing = cfg.tracing;
  check_launch(opt);
  const MemoryNeed need = check_memory(cfg, valid);  // before anything large is allocated (memory_need.hpp)
  // The processes backend sizes its shared memory for messages in flight from the largest rank's peak of message
  // buffers (BufferUse::message, counted exactly: memory_need.hpp).
  if (cfg.backend == Backend::processes)
    for (std::int64_t peak : need.message_peak)
      opt.heap_bytes = std::max(opt.heap_bytes, static_cast<std::size_t>(peak));

  // 1. Launch: every rank runs its part (rank_run.hpp).
  const auto t0 = std::chrono::steady_clock::now();
  announce_run(cfg);  // under mpirun, to the processes following rank 0's runs (mpi_runs.hpp)
  auto outcomes = launch(opt, [&](Communicator& comm) { return run_rank(cfg, valid, comm); });
  result.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (outcomes.empty()) return result;  // not the reporting rank (MPI)

  // 2. Gather every rank's result and Recorder.
  const SeqLayout L = p.layout();
  std::vector<RankResult> rr;
  for (auto& o : outcomes) {
    rr.push_back(RankResult::deserialize(o.result));
    result.ranks.push_back(RankReport{o.rank, L.positions(o.rank), std::move(o.stats)});
  }

  // 3. Assemble every rank's rows in global sequence order, beside the inputs.
  auto gather = [&](std::vector<double> RankResult::*field, std::int64_t row_elems) {
    std::vector<std::vector<double>> locals;
    for (auto& x : rr) locals.push_back(std::move(x.*field));
    return unshard(L, locals, p.batch, row_elems);
  };
  GlobalTensors& t = result.tensors;
  if (cfg.check || cfg.keep_inputs) t = make_inputs(cfg);
  if (!keeps_outputs(cfg)) return result;  // the ranks sent none back
  t.out = gather(&RankResult::out, p.heads * p.head_dim);
  t.lse.assign(static_cast<std::size_t>(p.batch * p.heads * p.seq), 0.0);
  for (const RankResult& x : rr) place_lse(p, x, t.lse);
  if (cfg.backward) {
    t.dq = gather(&RankResult::dq, p.heads * p.head_dim);
    t.dk = gather(&RankResult::dk, p.kv_heads * p.head_dim);
    t.dv = gather(&RankResult::dv, p.kv_heads * p.head_dim);
  }

  // 4. The check, when asked for.
  if (cfg.check) result.check = check_run(cfg, t);
  return result;
}

}  // namespace cpsim
