#include "sim/runtime/inference_run.hpp"

#include <algorithm>
#include <sstream>

#include "sim/comm/backend_registry.hpp"
#include "sim/comm/launcher.hpp"
#include "sim/core/bytes.hpp"
#include "sim/core/columns.hpp"
#include "sim/core/error.hpp"
#include "sim/core/random.hpp"
#include "sim/core/sizes.hpp"
#include "sim/kernels/device_registry.hpp"
#include "sim/kernels/host_io.hpp"
#include "sim/model/inference_count.hpp"
#include "sim/os/host_memory.hpp"
#include "sim/runtime/inputs.hpp"
#include "sim/runtime/report.hpp"
#include "sim/runtime/trace.hpp"

namespace cpsim {

namespace {

// Rows `pos` (each minus `offset`) of a [B, rows, E] tensor of stream `which`, into a [B, padded, E] host block
// (padding rows zero).
std::vector<double> shard_rows(std::uint64_t seed, Input which, std::int64_t batch, std::int64_t rows,
                               std::int64_t elems, const Positions& pos, std::int64_t offset, std::int64_t padded,
                               DType dtype) {
  std::vector<double> out(static_cast<std::size_t>(batch * padded * elems), 0.0);
  for (std::int64_t b = 0; b < batch; ++b) {
    std::int64_t local = 0;
    for (const Span& sp : pos.spans()) {
      const std::int64_t n = sp.hi - sp.lo;
      rounded_normals(seed, static_cast<std::uint64_t>(which),
                      static_cast<std::uint64_t>((b * rows + sp.lo - offset) * elems),
                      static_cast<std::size_t>(n * elems), dtype,
                      out.data() + (b * padded + local) * elems);
      local += n;
    }
  }
  return out;
}

// Rank r's part: its shards, the strategy's forward, its results.
std::string run_inference_rank(const InferenceRunConfig& cfg, Communicator& comm) {
  const InferenceProblem& p = cfg.problem;
  Recorder& rec = comm.recorder();
  if (cfg.step_hook) rec.set_step_hook([&](const std::string& phase, int step) { cfg.step_hook(comm, phase, step); });
  const auto dev_owner = make_device(built_in_backend(cfg.backend).device, rec, {});
  Device& dev = *dev_owner;
  const int r = comm.rank();
  const InferenceLayout L = p.layout(cfg.kind);
  const std::int64_t n = L.max_new(), m = L.max_kv(), T = p.new_tokens, S = p.seq();
  // 1. Shards of the seeded inputs.   q: [B, n, Nq, D]   k, v: [B, m, Nkv, D]
  const std::int64_t qe = p.heads * p.head_dim, ke = p.kv_heads * p.head_dim;
  const Buffer q = upload_new(dev, shard_rows(cfg.seed, Input::q, p.batch, T, qe, L.new_positions(r), p.cached, n, p.dtype),
                              {p.batch, n, p.heads, p.head_dim}, p.dtype, Layout::bsnd, "q");
  const Positions kv_pos = L.kv_positions(r);
  const Buffer k = upload_new(dev, shard_rows(cfg.seed, Input::k, p.batch, S, ke, kv_pos, 0, m, p.dtype),
                              {p.batch, m, p.kv_heads, p.head_dim}, p.dtype, Layout::bsnd, "k");
  const Buffer v = upload_new(dev, shard_rows(cfg.seed, Input::v, p.batch, S, ke, kv_pos, 0, m, p.dtype),
                              {p.batch, m, p.kv_heads, p.head_dim}, p.dtype, Layout::bsnd, "v");
  // 2. Forward.
  auto strategy = make_inference_strategy(cfg.kind, p, comm, dev);
  rec.begin_phase("forward");
  const InferenceOutput o = strategy->forward(q, k, v);
  dev.synchronize();
  rec.end_phase();
  // 3. Results.
  ByteWriter w;
  w.put(download_values(dev, o.out));
  w.put(download_values(dev, o.lse));
  return w.take();
}

// Refuses (UsageError) a step this machine cannot hold, before anything large is allocated. Counted: each rank's
// device peak (exact, from the counting run), its results as doubles twice (downloaded, then serialised), the
// results gathered, and with the check the whole step's inputs and an upstream gradient as doubles, the reference's
// results, and as much again for the f32 rule's plain loops: a lower bound of what the run holds at its largest.
void check_inference_memory(const InferenceRunConfig& cfg, const model::InferenceCount& counted) {
  const InferenceProblem& p = cfg.problem;
  const InferenceLayout L = p.layout(cfg.kind);
  const double B = static_cast<double>(p.batch), T = static_cast<double>(p.new_tokens),
               S = static_cast<double>(p.seq()), Nq = static_cast<double>(p.heads),
               Nkv = static_cast<double>(p.kv_heads), D = static_cast<double>(p.head_dim);
  double need = 0;
  for (const Recorder& rec : counted.ranks)
    need += static_cast<double>(rec.peak_bytes()) + 16 * B * static_cast<double>(L.max_new()) * Nq * (D + 1);
  need += 8 * B * T * Nq * (D + 1);  // out and lse, gathered
  if (cfg.check) need += 2 * 8 * (2 * B * T * Nq * D + 2 * B * S * Nkv * D + B * T * Nq * (D + 1));
  const HostMemory lim = host_memory();
  if (need <= static_cast<double>(lim.machine.bytes)) return;
  throw UsageError("the step needs at least " + format_bytes(need) + " of memory, more than the " +
                       format_bytes(static_cast<double>(lim.machine.bytes)) + " available (" + lim.machine.source + ")",
                   {Fix{{"--new-tokens " + std::to_string(std::max<std::int64_t>(1, p.new_tokens / 4)),
                         "--cached " + std::to_string(p.cached / 4)}},
                    Fix{cfg.check ? std::vector<std::string>{"drop --check"} : std::vector<std::string>{}, "", " or ", ""}});
}

}  // namespace

void check_inference_config(const InferenceRunConfig& cfg) {
  validate(cfg.problem, cfg.kind);
  const std::string name(inference_name(cfg.kind));
  const BackendInfo& b = built_in_backend(cfg.backend);
  const DeviceInfo& info = device_info(b.device);
  if (info.gpu)
    throw UsageError("the inference strategy " + name + " runs on the CPU backends (threads, processes, mpi); the " +
                         std::string(backend_name(cfg.backend)) + " backend's GPU device does not run it yet",
                     {Fix{{"--backend threads or processes"}}});
  if (!computes_in(info, cfg.problem.dtype))
    throw UsageError(std::string(dtype_name(cfg.problem.dtype)) + " is not computed by the " + info.name + " device",
                     {Fix{{"--dtype f64 or f32"}}});
}

InferenceRunResult run_inference(const InferenceRunConfig& cfg) {
  check_inference_config(cfg);
  const InferenceProblem& p = cfg.problem;
  const InferenceLayout L = p.layout(cfg.kind);
  InferenceRunResult result;
  result.config = cfg;
  LaunchOptions opt;
  opt.ranks = p.ranks;
  opt.backend = cfg.backend;
  opt.timeout = cfg.timeout;
  opt.tracing = cfg.tracing;
  check_launch(opt);
  // The memory the step needs, counted before anything large is allocated; the processes backend sizes its shared
  // memory from the most message bytes a rank holds.
  const model::InferenceCount counted = model::count_inference(p, cfg.kind);
  check_inference_memory(cfg, counted);
  if (cfg.backend == Backend::processes)
    for (const Recorder& rec : counted.ranks)
      opt.heap_bytes = std::max(opt.heap_bytes, static_cast<std::size_t>(rec.message_peak_bytes()));

  // 1. Launch.
  const auto t0 = std::chrono::steady_clock::now();
  auto outcomes = launch(opt, [&](Communicator& comm) { return run_inference_rank(cfg, comm); });
  result.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (outcomes.empty()) return result;  // another process of an MPI job: rank 0 gathers and reports

  // 2. Every rank's rows, in token order.   out: [B, T, Nq, D]   lse: [B, Nq, T]
  const std::int64_t B = p.batch, T = p.new_tokens, Nq = p.heads, D = p.head_dim, n = L.max_new();
  result.out.assign(static_cast<std::size_t>(B * T * Nq * D), 0.0);
  result.lse.assign(static_cast<std::size_t>(B * Nq * T), 0.0);
  for (auto& o : outcomes) {
    ByteReader rd(o.result);
    std::vector<double> out, lse;
    rd.get(out);
    rd.get(lse);
    const Positions pos = L.new_positions(o.rank);
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t i = 0; i < pos.size(); ++i) {
        const std::int64_t t = pos.at(i) - p.cached;  // the token's row
        std::copy_n(out.begin() + (b * n + i) * Nq * D, Nq * D, result.out.begin() + (b * T + t) * Nq * D);
        for (std::int64_t h = 0; h < Nq; ++h)
          result.lse[static_cast<std::size_t>((b * Nq + h) * T + t)] = lse[static_cast<std::size_t>((b * Nq + h) * n + i)];
      }
    result.ranks.push_back(RankReport{o.rank, pos, std::move(o.stats)});
  }

  // 3. The check: the whole step on one device, queries at positions P..P+T-1 over keys 0..P+T-1.
  if (cfg.check) {
    AttentionProblem whole = attention_problem(AttentionShape{B, T, p.seq(), Nq, p.kv_heads, D}, p.mask(), p.dtype,
                                               cfg.seed, p.scale);
    whole.q_pos = iota_positions(p.cached, T);
    whole.merges = p.ranks - 1;
    std::vector<std::vector<Span>> owners;  // rows of the step's tensors, per rank
    for (int r = 0; r < p.ranks; ++r) {
      std::vector<Span> rows;
      for (const Span& sp : L.new_positions(r).spans()) rows.push_back({sp.lo - p.cached, sp.hi - p.cached});
      owners.push_back(rows);
    }
    const CheckRule rule = check_rule(p.dtype, false, p.kv_heads != p.heads);
    result.check = check_against_reference(whole, rule, RefForward{result.out, result.lse}, nullptr, &owners);
  }
  return result;
}

std::string format_inference_report(const InferenceRunResult& r) {
  const InferenceRunConfig& cfg = r.config;
  const InferenceProblem& p = cfg.problem;
  const InferenceLayout L = p.layout(cfg.kind);
  std::ostringstream os;
  os << "cpsim run: " << inference_name(cfg.kind) << ", C=" << p.ranks << " ranks on " << backend_name(cfg.backend)
     << "\n  B=" << p.batch << " new tokens T=" << p.new_tokens << " cached P=" << p.cached << " Nq=" << p.heads
     << " Nkv=" << p.kv_heads << " D=" << p.head_dim << " " << dtype_name(p.dtype)
     << ", " << p.mask().describe() << " (queries at P..P+T-1), forward, seed " << cfg.seed << "\n"
     << "  new tokens " << (is_prefill(cfg.kind) ? "in 2C chunks (zigzag over the new tokens)" : "round-robin")
     << ", cache in 2C chunks where its prefill wrote it\n\n";
  os << right("rank", 4) << "  " << left("new tokens", 22) << right("K/V rows", 9) << right("sent", 12)
     << right("received", 12) << right("pairs", 12) << right("forward", 12) << right("per token", 12) << "\n";
  for (const RankReport& rr : r.ranks) {
    const CommCounts& c = rr.stats.comm_counts();
    const auto it = rr.stats.phase_us().find("forward");
    const double ms = it == rr.stats.phase_us().end() ? 0 : it->second / 1e3;
    os << right(std::to_string(rr.rank), 4) << "  " << left(rr.positions.empty() ? "-" : rr.positions.text(), 22)
       << right(std::to_string(L.kv_count(rr.rank)), 9) << right(format_bytes(static_cast<double>(c.bytes_sent)), 12)
       << right(format_bytes(static_cast<double>(c.bytes_received)), 12)
       << right(std::to_string(rr.stats.total_work().pairs), 12) << right(fmt::format("{:.3f} ms", ms), 12)
       << right(fmt::format("{:.3f} ms", ms / static_cast<double>(p.new_tokens)), 12) << "\n";
  }
  const InferenceBytes f = inference_bytes(p, cfg.kind);
  os << "\nBytes each rank sends, by formula: " << format_bytes(static_cast<double>(f.total()));
  if (cfg.kind == InferenceKind::pass_kv)
    os << " = (C-1) x K/V of " << L.max_kv() << " rows\n";
  else
    os << " = (C-1) x (Q of " << L.max_new() << " rows + their partial out and LSE)\n";
  if (r.check.ran) {
    RunResult shown;
    shown.check = r.check;
    os << "\n" << format_check(shown);
  }
  return os.str();
}

Json inference_run_json(const InferenceRunResult& r) {
  const InferenceProblem& p = r.config.problem;
  Json ranks = Json::array();
  for (const RankReport& rr : r.ranks) {
    const auto it = rr.stats.phase_us().find("forward");
    ranks.push_back({{"rank", rr.rank},
                     {"new_positions", runs_json(rr.positions.runs())},
                     {"bytes_sent", rr.stats.comm_counts().bytes_sent},
                     {"bytes_received", rr.stats.comm_counts().bytes_received},
                     {"pairs", rr.stats.total_work().pairs},
                     {"forward_us", it == rr.stats.phase_us().end() ? 0.0 : it->second}});
  }
  Json j{{"config",
          {{"strategy", std::string(inference_name(r.config.kind))},
           {"ranks", p.ranks},
           {"batch", p.batch},
           {"new_tokens", p.new_tokens},
           {"cached", p.cached},
           {"window", p.window},
           {"heads", p.heads},
           {"kv_heads", p.kv_heads},
           {"head_dim", p.head_dim},
           {"dtype", std::string(dtype_name(p.dtype))},
           {"backend", std::string(backend_name(r.config.backend))},
           {"seed", r.config.seed}}},
         {"bytes_per_rank_formula", inference_bytes(p, r.config.kind).total()},
         {"ranks", ranks},
         {"wall_ms", r.wall_ms}};
  if (r.check.ran) j["check"] = check_json(r.check);
  return j;
}

std::string inference_trace_json(const InferenceRunResult& r) {
  if (!r.config.tracing)
    throw UsageError("this run was not traced, so it has no events to write; set InferenceRunConfig::tracing");
  const InferenceProblem& p = r.config.problem;
  const InferenceLayout L = p.layout(r.config.kind);
  Json c{{"strategy", std::string(inference_name(r.config.kind))},
         {"sharding", is_prefill(r.config.kind) ? "2C chunks of the new tokens" : "new tokens round-robin"},
         {"ranks", p.ranks},
         {"batch", p.batch},
         {"seq", p.seq()},
         {"new_tokens", p.new_tokens},
         {"cached", p.cached},
         {"heads", p.heads},
         {"kv_heads", p.kv_heads},
         {"head_dim", p.head_dim},
         {"dtype", std::string(dtype_name(p.dtype))},
         {"causal", true},
         {"mask", p.mask().describe() + " from position P"},
         {"window", p.window},
         {"attention_mask", {{"kind", "causal"}, {"window", p.window}}},
         {"backend", std::string(backend_name(r.config.backend))},
         {"backward", false},
         {"seed", static_cast<std::int64_t>(r.config.seed)}};
  Json run{{"config", std::move(c)}, {"ranks", Json::array()}};
  std::vector<RankReport> ranks;
  for (const RankReport& rk : r.ranks) {
    const Recorder& s = rk.stats;
    const Positions kv = L.kv_positions(rk.rank);
    Json rank{{"rank", rk.rank},
              {"position_runs", runs_json(kv.runs())},
              {"positions_text", kv.text()},
              {"new_position_runs", runs_json(rk.positions.runs())}};
    const WorkCounts& w = s.total_work();
    rank["work"] = {{"forward", {{"pairs", w.pairs}, {"flops", w.flops}, {"blocks", w.calls},
                                 {"skipped_blocks", w.skipped_calls}}}};
    add_rank_counts(rank, s);
    run["ranks"].push_back(std::move(rank));
    ranks.push_back(RankReport{rk.rank, kv, s});
  }
  if (r.check.ran) run["check"] = check_json(r.check);
  run["wall_ms"] = r.wall_ms;
  return trace_json(run, ranks);
}

}  // namespace cpsim
