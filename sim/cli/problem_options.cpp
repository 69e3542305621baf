#include "sim/cli/problem_options.hpp"

#include "sim/core/error.hpp"
#ifdef CPSIM_HAVE_CUDA
#include "sim/cuda/gpu_kernel.hpp"
#endif

namespace cpsim::cli {

void add_problem_options(po::options_description& desc, ProblemOptions& o) {
  desc.add_options()("strategy", po::value(&o.strategy)->default_value(o.strategy),
                     "all_gather | ulysses | ring | hybrid")(
      "sharding", po::value(&o.sharding)->default_value(o.sharding), "zigzag | contiguous")(
      "ranks,C", po::value(&o.ranks)->default_value(o.ranks), "context-parallel ranks C")(
      "a2a", po::value(&o.a2a)->default_value(o.a2a), "hybrid: A2A group size A (C = A x R; 0 picks 2)")(
      "kv-replicate", "ulysses/hybrid: copy each KV head onto A/Nkv ranks when A > Nkv")(
      "batch,B", po::value(&o.batch)->default_value(o.batch), "batch B")(
      "seq,S", po::value(&o.seq)->default_value(o.seq), "sequence length S")(
      "heads,N", po::value(&o.heads)->default_value(o.heads), "query heads Nq")(
      "kv-heads", po::value(&o.kv_heads)->default_value(o.kv_heads), "KV heads Nkv (0: same as --heads)")(
      "head-dim,D", po::value(&o.head_dim)->default_value(o.head_dim), "head dim D")(
      "dtype", po::value(&o.dtype)->default_value(o.dtype), "f32 | f64 (GPU backends: bf16 | f32)")(
      "full", "attention without the causal mask")(
      "backend", po::value(&o.backend)->default_value(o.backend),
      "threads | processes | mpi (under mpirun -np C; MPI builds) | cuda-threads | nccl (CUDA builds)")(
      "kernel", po::value(&o.kernel)->default_value(o.kernel),
      "cuda-threads, nccl: the attention kernels, auto | mma2 | mma1 | simt (docs/gpu.md)")(
      "backward", "run the backward pass too")("seed", po::value(&o.seed)->default_value(o.seed), "seed of the inputs")(
      "timeout", po::value(&o.timeout_s)->default_value(o.timeout_s),
      "seconds any rank may wait before a deadlock is reported");
}

RunConfig to_run_config(const ProblemOptions& o, const po::variables_map& vm) {
  RunConfig c;
  c.strategy = parse_strategy(o.strategy);
  c.backend = parse_backend(o.backend);
  c.backward = vm.count("backward") > 0;
  c.seed = o.seed;
  require(o.timeout_s > 0, "--timeout must be positive", "use --timeout 120");
  c.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o.timeout_s * 1000));
  Problem& p = c.problem;
  p.batch = o.batch;
  p.seq = o.seq;
  p.heads = o.heads;
  p.kv_heads = o.kv_heads == 0 ? o.heads : o.kv_heads;
  p.head_dim = o.head_dim;
  p.causal = vm.count("full") == 0;
  p.dtype = parse_dtype(o.dtype);
  p.sharding = parse_sharding(o.sharding);
  p.ranks = o.ranks;
  p.a2a = o.a2a;
  require(o.a2a >= 0, "--a2a must be 0 (pick) or a positive group size", "use --a2a 2");
  p.kv_replicate = vm.count("kv-replicate") > 0;
  validate(p, c.strategy);
  c.gpu_kernel = o.kernel;
  if (o.kernel != "auto") {
    require(c.backend == Backend::cuda_threads || c.backend == Backend::nccl,
            "--kernel chooses among the CUDA device's attention kernels (got --kernel " + o.kernel +
                " with --backend " + o.backend + ")",
            "use --backend cuda-threads or nccl, or leave --kernel out");
#ifdef CPSIM_HAVE_CUDA
    const std::string why = gpu_kernel_problem(parse_gpu_kernel(o.kernel), p.dtype, p.head_dim);
    if (!why.empty()) throw UsageError(why);
#endif
  }
  return c;
}

}  // namespace cpsim::cli
