// `cpsim attention`: the tiled kernel on one CPU device, forward and backward over the whole problem, timed, and
// (--check) compared with the f64 reference under the project's rule for its dtype (sim/kernels/check.hpp).
// The mask is causal or full, with documents (--docs) and a window (--window) from the shared flag table
// (problem_options.hpp); the kernel, the counts and the check all take it.
#include <cinttypes>
#include <cstdio>
#include <iostream>
#include <string>

#include <fmt/printf.h>

#include "sim/cli/cli.hpp"
#include "sim/cli/problem_options.hpp"
#include "sim/core/error.hpp"
#include "sim/core/json.hpp"
#include "sim/core/sizes.hpp"
#include "sim/kernels/check.hpp"
#include "sim/kernels/cpu_device.hpp"
#include "sim/kernels/single_run.hpp"
#include "sim/runtime/inputs.hpp"
#include "sim/runtime/memory_need.hpp"

namespace cpsim::cli {
namespace {

struct AttentionArgs {
  AttentionShape shape{};
  DType dtype = DType::f32;
  bool causal = true, check = false, json = false;
  Mask mask;            // causal or full, with the documents and window of --docs / --window
  Documents documents;  // empty without --docs
  std::uint64_t seed = 0;
  int tile = CpuDevice::kDefaultTile;
  std::int64_t memory_limit = 0;  // --memory-limit; 0: what the machine has left
};

// The divisors of n, ascending (up to 12 of them; n may be as large as an int64).
std::string divisors_of(std::int64_t n) {
  std::vector<std::int64_t> low, high;
  for (std::int64_t d = 1; d <= n / d; ++d)
    if (n % d == 0) {
      low.push_back(d);
      if (d != n / d) high.insert(high.begin(), n / d);
    }
  low.insert(low.end(), high.begin(), high.end());
  std::string s;
  for (std::size_t i = 0; i < low.size() && i < 12; ++i) s += (s.empty() ? "" : ", ") + std::to_string(low[i]);
  return low.size() > 12 ? s + ", ..." : s;
}

// Throws UsageError naming the constraint and a fix for every impossible flag.
AttentionArgs parse_args(const std::vector<std::string>& args, bool& help) {
  po::options_description desc("cpsim attention options");
  std::int64_t B = 1, S = 512, N = 8, K = 0, D = 64;
  std::string dtype = "f32", memory_limit;
  bool causal = false, full = false;
  AttentionArgs a;
  ProblemOptions mask_flags;  // --docs, --window: the shared table's rows (one device: no --pad-docs, no sharding)
  mask_flags.seed = 0;
  desc.add_options()                                                                                        //
      ("batch", size_value("batch", &B)->default_value("1"), size_help("batch size B").c_str())             //
      ("seq", size_value("seq", &S)->default_value("512"), size_help("sequence length S").c_str())          //
      ("heads", size_value("heads", &N)->default_value("8"), size_help("query heads Nq").c_str())           //
      ("kv-heads", size_value("kv-heads", &K), "key/value heads Nkv (default: Nq); Nq % Nkv == 0")          //
      ("head-dim", size_value("head-dim", &D)->default_value("64"), size_help("head dimension D").c_str())  //
      ("dtype", po::value(&dtype)->default_value("f32"), "f32 or f64")                                      //
      ("causal", po::bool_switch(&causal), "causal mask: key visible iff key <= query (default)")           //
      ("full", po::bool_switch(&full), "no mask: every key visible")                                        //
      ("check", po::bool_switch(&a.check), "compare with the f64 reference; exit 1 when a tensor is off")   //
      ("json", po::bool_switch(&a.json), "print one JSON object")                                           //
      ("seed", po::value(&a.seed)->default_value(0), "seed of the normal inputs")                           //
      ("tile", po::value(&a.tile)->default_value(CpuDevice::kDefaultTile), "rows per query and key tile")   //
      ("memory-limit", po::value(&memory_limit)->value_name("BYTES"),
       "the most memory the attention may hold (K, M, G, T); default: what this machine has left");
  add_problem_options(desc, mask_flags, kFlagDocs | kFlagWindow);
  po::variables_map vm;
  help = !parse("attention", desc, args, vm);
  if (help) return a;
  if (!vm.count("kv-heads")) K = N;
  // The mask: listed --docs lengths make S unless --seq is given (then they must sum to it), as on every command.
  RunConfig mc;
  mc.seed = a.seed;
  mc.problem.ranks = 1;
  mc.problem.seq = S;
  mc.problem.causal = !full;
  apply_problem_options(mask_flags, vm, kFlagDocs | kFlagWindow, mc);
  S = mc.problem.seq;
  require(B >= 1, "the batch size must be at least 1 (got --batch " + std::to_string(B) + ")", "use --batch 1");
  require(S >= 1, "the sequence length must be at least 1 (got --seq " + std::to_string(S) + ")", "use --seq 512");
  require(N >= 1, "there must be at least one query head (got --heads " + std::to_string(N) + ")", "use --heads 8");
  require(K >= 1, "there must be at least one kv head (got --kv-heads " + std::to_string(K) + ")",
          "use --kv-heads " + std::to_string(N));
  // Every tensor within what one process can address (no product of extents may wrap); the whole is checked against
  // the memory before anything is made (cmd_attention).
  tensor_bytes("q", {{"B", B, "batch"}, {"S", S, "seq"}, {"Nq", N, "heads"}, {"D", D, "head-dim"}}, sizeof(double),
               "doubles");
  tensor_bytes("k", {{"B", B, "batch"}, {"S", S, "seq"}, {"Nkv", K, "kv-heads"}, {"D", D, "head-dim"}}, sizeof(double),
               "doubles");
  if (N % K != 0)
    require(false,
            "grouped-query attention needs the query heads to be a multiple of the kv heads (Nq=" + std::to_string(N) +
                ", Nkv=" + std::to_string(K) + ")",
            "use --kv-heads one of " + divisors_of(N));
  require(D >= 1, "the head dimension must be at least 1 (got --head-dim " + std::to_string(D) + ")",
          "use --head-dim 64");
  require(!(causal && full), "--causal and --full exclude each other", "give one of them");
  require(a.tile >= 1 && a.tile <= CpuDevice::kMaxTile,
          "the tile holds 1 to " + std::to_string(CpuDevice::kMaxTile) +
              " rows, its scores a tile x tile block (got --tile " + std::to_string(a.tile) + ")",
          "use --tile " + std::to_string(CpuDevice::kDefaultTile));
  a.dtype = parse_dtype(dtype);
  require(a.dtype != DType::bf16, "bf16 needs a GPU device", "use --dtype f32 or f64");
  a.causal = !full;
  a.documents = mc.problem.documents();  // UsageError: lengths that do not sum to S
  a.mask = mc.problem.mask();
  a.shape = AttentionShape{.B = B, .Sq = S, .Sk = S, .Nq = N, .Nkv = K, .D = D};
  if (vm.count("memory-limit")) a.memory_limit = parse_size64("memory-limit", memory_limit);
  require(!vm.count("memory-limit") || a.memory_limit > 0, "--memory-limit must be at least 1 byte",
          "use --memory-limit 8G");
  return a;
}

Json json_call(const WorkCounts& w, double seconds) {
  return {{"seconds", seconds}, {"gflops", w.flops / seconds / 1e9},  {"flops", w.flops},
          {"pairs", w.pairs},   {"tiles_computed", w.tiles_computed}, {"tiles_skipped", w.tiles_skipped}};
}

void print_json(const AttentionArgs& a, const SingleRun& r, const CheckReport* c) {
  const AttentionShape& s = a.shape;
  Json cfg{{"batch", s.B},
           {"seq", s.Sq},
           {"heads", s.Nq},
           {"kv_heads", s.Nkv},
           {"head_dim", s.D},
           {"dtype", dtype_name(a.dtype)},
           {"causal", a.causal},
           {"mask", a.mask.describe()},
           {"window", a.mask.window()}};
  if (!a.documents.empty()) {
    cfg["documents"] = a.documents.lengths;
    cfg["document_bounds"] = a.mask.bounds();
  }
  cfg["seed"] = static_cast<std::int64_t>(a.seed);
  cfg["tile"] = a.tile;
  cfg["device"] = "cpu";
  const Json j{{"config", std::move(cfg)},
               {"forward", json_call(r.fwd_work, r.fwd_seconds)},
               {"backward", json_call(r.bwd_work, r.bwd_seconds)},
               {"peak_bytes", r.peak_bytes},
               {"check", c == nullptr ? Json() : check_json(*c)}};
  std::cout << json_text(j) << "\n";
}

void print_text(const AttentionArgs& a, const SingleRun& r, const CheckReport* c) {
  const AttentionShape& s = a.shape;
  fmt::printf("attention on the cpu device: B=%" PRId64 " S=%" PRId64 " Nq=%" PRId64 " Nkv=%" PRId64 " D=%" PRId64
              " %s %s, tile %d, seed %" PRIu64 "\n",
              s.B, s.Sq, s.Nq, s.Nkv, s.D, std::string(dtype_name(a.dtype)).c_str(), a.mask.describe().c_str(), a.tile,
              a.seed);
  if (!a.documents.empty()) fmt::printf("  %s\n", a.documents.describe().c_str());
  fmt::printf("  %-9s %12s %10s %14s %16s\n", "call", "time ms", "GFLOP/s", "visible pairs", "tiles done/skip");
  auto row = [](const char* name, const WorkCounts& w, double sec) {
    const std::string tiles = std::to_string(w.tiles_computed) + "/" + std::to_string(w.tiles_skipped);
    fmt::printf("  %-9s %12.3f %10.2f %14" PRId64 " %16s\n", name, sec * 1e3, w.flops / sec / 1e9, w.pairs,
                tiles.c_str());
  };
  row("forward", r.fwd_work, r.fwd_seconds);
  row("backward", r.bwd_work, r.bwd_seconds);
  fmt::printf("  peak device memory %.2f MiB\n", static_cast<double>(r.peak_bytes) / (1 << 20));
  if (c == nullptr) return;
  const bool plain = c->kind == RuleKind::plain_f32;
  fmt::printf("check against the f64 reference (%s)\n", c->rule.c_str());
  fmt::printf("  %-6s %12s %12s %12s\n", "tensor", "max abs err", "allowed", plain ? "plain f32" : "");
  auto line = [&](const char* name, double e, double allowed, double baseline, double worst) {
    fmt::printf("  %-6s %12.3e %12.3e ", name, e, allowed);
    if (plain) fmt::printf("%12.3e", baseline);
    fmt::printf("%s\n", worst <= 1 ? "" : "   <- too large");
  };
  line("out", c->err.out, c->allowed.out, c->baseline.out, c->worst.out);
  line("lse", c->err.lse, c->allowed.lse, c->baseline.lse, c->worst.lse);
  line("dq", c->err.dq, c->allowed.dq, c->baseline.dq, c->worst.dq);
  line("dk", c->err.dk, c->allowed.dk, c->baseline.dk, c->worst.dk);
  line("dv", c->err.dv, c->allowed.dv, c->baseline.dv, c->worst.dv);
  fmt::printf("%s\n", c->passed ? "PASSED" : "FAILED");
}

int cmd_attention(const std::vector<std::string>& args) {
  bool help = false;
  const AttentionArgs a = parse_args(args, help);
  if (help) return 0;
  check_single_device_memory(a.shape, a.dtype, true, a.check, a.memory_limit);  // before anything large is made
  const AttentionProblem p = attention_problem(a.shape, a.mask, a.dtype, a.seed);
  Recorder rec;
  CpuDevice dev(rec, a.tile);
  const SingleRun r = run_single_device(dev, p, a.dtype);
  CheckReport c;
  if (a.check) c = check_against_reference(p, check_rule(a.dtype, false, a.shape.Nq != a.shape.Nkv), r.fwd, &r.bwd);
  if (a.json)
    print_json(a, r, a.check ? &c : nullptr);
  else
    print_text(a, r, a.check ? &c : nullptr);
  return a.check && !c.passed ? 1 : 0;
}

}  // namespace

CPSIM_COMMAND(attention, "the tiled attention kernel on one device, timed and checked against the reference",
              cmd_attention);

}  // namespace cpsim::cli
