#include "sim/cli/problem_options.hpp"

#include "sim/core/error.hpp"

namespace cpsim::cli {

void add_problem_options(po::options_description& desc, ProblemOptions& o, unsigned flags) {
  auto add = [&](ProblemFlag f, const char* name, auto* value, const char* help) {
    if (flags & f) desc.add_options()(name, po::value(value)->default_value(*value), help);
  };
  auto add_switch = [&](ProblemFlag f, const char* name, const char* help) {
    if (flags & f) desc.add_options()(name, help);
  };
  // A size takes the K, M, G, T suffixes of parse_size64 (--seq 4K), as layout and predict do.
  auto add_size = [&](ProblemFlag f, const char* name, std::int64_t* value, const std::string& help) {
    if (!(flags & f)) return;
    const std::string flag = std::string(name).substr(0, std::string(name).find(','));
    desc.add_options()(name, size_value(flag, value)->default_value(std::to_string(*value)),
                       size_help(help).c_str());
  };
  add(kFlagStrategy, "strategy", &o.strategy,
      "all_gather | ulysses | ring | hybrid; with --new-tokens, an inference step: pass_kv | pass_q | decode");
  add(kFlagSharding, "sharding", &o.sharding,
      "zigzag (per document with --docs) | contiguous | striped | balanced | global-zigzag | doc-contiguous");
  add(kFlagRanks, "ranks,C", &o.ranks, "context-parallel ranks C");
  add(kFlagA2a, "a2a", &o.a2a, "hybrid: A2A group size A (C = A x R; left out: 2 for an even C, else 1)");
  add_switch(kFlagKvReplicate, "kv-replicate", "ulysses/hybrid: copy each KV head onto A/Nkv ranks when A > Nkv");
  add_size(kFlagBatch, "batch,B", &o.batch, "batch B");
  add_size(kFlagSeq, "seq,S", &o.seq, "sequence length S");
  add_size(kFlagHeads, "heads,N", &o.heads, "query heads Nq");
  add_size(kFlagKvHeads, "kv-heads", &o.kv_heads, "KV heads Nkv (0: same as --heads)");
  add_size(kFlagHeadDim, "head-dim,D", &o.head_dim, "head dim D");
  add(kFlagDtype, "dtype", &o.dtype, "f32 | f64 (GPU backends: bf16 | f32)");
  add_switch(kFlagFull, "full", "attention without the causal mask");
  add(kFlagBackend, "backend", &o.backend,
      "threads | processes | mpi (under mpirun -np C; MPI builds) | cuda-threads | nccl (CUDA builds)");
  add(kFlagKernel, "kernel", &o.kernel,
      "cuda-threads, nccl: the attention kernels, auto | mma2 | mma1 | simt (docs/gpu.md)");
  add_switch(kFlagBackward, "backward", "run the backward pass too");
  add(kFlagSeed, "seed", &o.seed, "seed of the inputs");
  add(kFlagTimeout, "timeout", &o.timeout_s, "seconds any rank may wait before a deadlock is reported");
  if (flags & kFlagMemoryLimit)
    desc.add_options()("memory-limit", po::value(&o.memory_limit)->value_name("BYTES"),
                       "the most memory the run may hold (K, M, G, T: powers of 1024); a run that needs more is "
                       "refused before it starts (default: what this machine has left: MemAvailable, the cgroup "
                       "limit, ulimit -v)");
  add(kFlagDocs, "docs", &o.docs,
      "documents packed into the sequence: L1,L2,... (lengths, K, M: powers of 1024; S is their sum), random:K "
      "(K seeded lengths), sample:K (K lengths drawn from MagiAttention's document-length distribution, scaled to S) or "
      "sample:K:FILE (from a distribution of your own in the same CSV format)");
  add_switch(kFlagPadDocs, "pad-docs",
             "pad each document to a multiple of 2C for per-document zigzag (the padding is left out of the check)");
  add_size(kFlagWindow, "window", &o.window, "sliding window W: a query sees the W latest keys (0: no window)");
  add_size(kFlagChunk, "chunk", &o.chunk, "balanced sharding: tokens per chunk (0: S/(4C))");
}

ProblemOptions problem_options(const RunConfig& c) {
  const Problem& p = c.problem;
  ProblemOptions o;
  o.strategy = std::string(strategy_name(c.strategy));
  o.sharding = std::string(sharding_name(p.sharding));
  o.dtype = std::string(dtype_name(p.dtype));
  o.backend = std::string(backend_name(c.backend));
  o.ranks = p.ranks;
  o.a2a = p.a2a;
  o.batch = p.batch;
  o.seq = p.seq;
  o.heads = p.heads;
  o.kv_heads = p.kv_heads == p.heads ? 0 : p.kv_heads;  // the one --kv-heads rule (see the header)
  o.head_dim = p.head_dim;
  o.seed = c.seed;
  o.timeout_s = static_cast<double>(c.timeout.count()) / 1000;
  if (c.memory_limit > 0) o.memory_limit = std::to_string(c.memory_limit);
  if (p.docs.random > 0) o.docs = "random:" + std::to_string(p.docs.random);
  if (p.docs.sample > 0)
    o.docs = "sample:" + std::to_string(p.docs.sample) +
             (p.docs.distribution_file.empty() ? "" : ":" + p.docs.distribution_file);
  for (std::int64_t L : p.docs.lengths) o.docs += (o.docs.empty() ? "" : ",") + std::to_string(L);
  o.window = p.window;
  o.chunk = p.chunk;
  o.kernel = c.device.kernel;
  return o;
}

void apply_problem_options(const ProblemOptions& o, const po::variables_map& vm, unsigned flags, RunConfig& c) {
  Problem& p = c.problem;
  if (flags & kFlagStrategy) c.strategy = parse_strategy(o.strategy);
  if (flags & kFlagSharding) p.sharding = parse_sharding(o.sharding);
  if (flags & kFlagRanks) p.ranks = o.ranks;
  if (flags & kFlagA2a) {
    // 0 is the default's "pick" (2 when C is even), never a value to give: --a2a 0 would silently run as A = 1.
    const bool given = vm.count("a2a") > 0 && !vm["a2a"].defaulted();
    require(o.a2a >= 1 || (o.a2a == 0 && !given),
            "--a2a must be a positive A2A group size A, a divisor of C (got " + std::to_string(o.a2a) + ")",
            "use --a2a 2, or leave --a2a out (an even C picks 2)");
    p.a2a = o.a2a;
  }
  if (flags & kFlagKvReplicate) p.kv_replicate = vm.count("kv-replicate") > 0;
  if (flags & kFlagBatch) p.batch = o.batch;
  if (flags & kFlagSeq) p.seq = o.seq;
  if (flags & kFlagHeads) p.heads = o.heads;
  p.kv_heads = o.kv_heads == 0 ? p.heads : o.kv_heads;  // with or without the flag: 0 follows the heads
  if (flags & kFlagHeadDim) p.head_dim = o.head_dim;
  if (flags & kFlagDtype) p.dtype = parse_dtype(o.dtype);
  if (flags & kFlagFull) p.causal = vm.count("full") == 0;
  if (flags & kFlagBackend) c.backend = parse_backend(o.backend);
  if (flags & kFlagBackward) c.backward = vm.count("backward") > 0;
  if (flags & kFlagSeed) c.seed = o.seed;
  if (flags & kFlagTimeout) c.timeout = parse_timeout("timeout", o.timeout_s);
  if ((flags & kFlagMemoryLimit) && vm.count("memory-limit")) {
    c.memory_limit = parse_size64("memory-limit", o.memory_limit);
    require(c.memory_limit > 0, "--memory-limit must be at least 1 byte", "use --memory-limit 8G");
  }
  if (flags & kFlagWindow) {
    require(o.window >= 0, "--window must be 0 (none) or positive (got " + std::to_string(o.window) + ")",
            "use --window 256");
    p.window = o.window;
  }
  if (flags & kFlagChunk) {
    require(o.chunk >= 0, "--chunk must be 0 (pick) or positive (got " + std::to_string(o.chunk) + ")",
            "use --chunk 16");
    p.chunk = o.chunk;
  }
  if (flags & kFlagPadDocs) p.docs.pad = vm.count("pad-docs") > 0;
  if ((flags & kFlagDocs) && !o.docs.empty()) {
    const bool pad = p.docs.pad;
    p.docs = parse_docs(o.docs);
    p.docs.pad = pad;
    p.docs.seed = c.seed;
    // Listed lengths make S unless --seq was given (then they must sum to it: Problem::documents says so).
    const bool seq_given = vm.count("seq") > 0 && !vm["seq"].defaulted();  // the table's --seq or a command's own
    if (!p.docs.lengths.empty() && !seq_given) p.seq = documents_seq(p.docs, p.ranks);
  }
  require(!p.docs.pad || p.docs.any(), "--pad-docs pads the documents of --docs",
          "add --docs L1,L2,... or drop --pad-docs");
  if (flags & kFlagKernel) c.device.kernel = o.kernel;
}

void check_kv_replicate(const RunConfig& c) {
  const Problem& p = c.problem;
  if (!p.kv_replicate || p.replicates_kv(c.strategy)) return;
  const std::string A = std::to_string(p.a2a_size(c.strategy)), Nkv = std::to_string(p.kv_heads);
  require(false,
          "--kv-replicate copies KV heads when the A2A group of A=" + A + " ranks cannot split the Nkv=" + Nkv +
              " KV heads, but here it can (each rank gets Nkv/A of them): nothing would be replicated",
          "drop --kv-replicate");
}

std::pair<RunConfig, ValidProblem> to_run_config(const ProblemOptions& o, const po::variables_map& vm) {
  RunConfig c;
  apply_problem_options(o, vm, kAllProblemFlags, c);
  ValidProblem valid = check_config(c);
  check_kv_replicate(c);
  return {c, valid};
}

}  // namespace cpsim::cli
