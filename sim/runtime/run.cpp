#include "sim/runtime/run.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "sim/core/bytes.hpp"
#include "sim/core/error.hpp"
#include "sim/core/random.hpp"
#include "sim/kernels/check.hpp"
#include "sim/kernels/cpu_device.hpp"
#include "sim/kernels/reference.hpp"
#include "sim/runtime/mpi_runs.hpp"
#ifdef CPSIM_HAVE_CUDA
#include "sim/cuda/cuda_api.hpp"
#endif

namespace cpsim {

namespace {

bool on_gpu(Backend b) { return b == Backend::nccl || b == Backend::cuda_threads; }

// Rounds values to what a buffer of dtype t holds, so the reference sees exactly the inputs the ranks see.
void round_to(std::vector<double>& v, DType t) {
  if (t == DType::f32)
    for (double& x : v) x = static_cast<float>(x);
#ifdef CPSIM_HAVE_CUDA
  if (t == DType::bf16)
    for (double& x : v) x = round_to_bf16(x);
#endif
}

// Rows [B, s] of a [B, S, E] tensor generated from the seed: row (b, pos) starts at index (b*S + pos)*E.
std::vector<double> seeded_rows(std::uint64_t seed, std::uint64_t stream, const SeqLayout& L, int rank,
                                std::int64_t batch, std::int64_t row_elems, DType dtype) {
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(batch * L.local_len() * row_elems));
  for (std::int64_t b = 0; b < batch; ++b)
    for (const Span& sp : L.spans(rank)) {
      const auto first = static_cast<std::uint64_t>((b * L.seq() + sp.lo) * row_elems);
      const auto v = normals(seed, stream, static_cast<std::size_t>((sp.hi - sp.lo) * row_elems), first);
      out.insert(out.end(), v.begin(), v.end());
    }
  round_to(out, dtype);
  return out;
}

Buffer to_device(Device& dev, const std::vector<double>& host, Dims dims, DType dtype, const std::string& name) {
  Buffer b = dev.alloc(dims, dtype, Layout::bsnd, name);
#ifdef CPSIM_HAVE_CUDA
  if (dtype == DType::bf16) {
    upload_doubles(dev, b, host);
    return b;
  }
#endif
  if (dtype == DType::f64) {
    dev.upload(b, host.data());
  } else if (dtype == DType::f32) {
    std::vector<float> f(host.begin(), host.end());
    dev.upload(b, f.data());
  } else {
    throw UsageError("dtype " + std::string(dtype_name(dtype)) + " is not supported on this device; use --dtype f32 or f64");
  }
  return b;
}

std::vector<double> to_host(Device& dev, const Buffer& b) {
#ifdef CPSIM_HAVE_CUDA
  if (b.dtype() == DType::bf16) return download_doubles(dev, b);
#endif
  std::vector<double> out(static_cast<std::size_t>(b.numel()));
  if (b.dtype() == DType::f64) {
    dev.download(b, out.data());
  } else if (b.dtype() == DType::f32) {
    std::vector<float> f(out.size());
    dev.download(b, f.data());
    std::copy(f.begin(), f.end(), out.begin());
  } else {
    throw Error("to_host: unsupported dtype");
  }
  return out;
}

// What one rank sends back to the caller.
struct RankResult {
  std::vector<double> out, lse, dq, dk, dv;
  std::int64_t lse_heads = 0, lse_head0 = 0;
  Positions lse_positions;

  std::string serialize() const {
    ByteWriter w;
    w.put(out);
    w.put(lse);
    w.put(dq);
    w.put(dk);
    w.put(dv);
    w.put(lse_heads);
    w.put(lse_head0);
    w.put(lse_positions);
    return w.take();
  }
  static RankResult deserialize(const std::string& s) {
    ByteReader r(s);
    RankResult x;
    r.get(x.out);
    r.get(x.lse);
    r.get(x.dq);
    r.get(x.dk);
    r.get(x.dv);
    r.get(x.lse_heads);
    r.get(x.lse_head0);
    r.get(x.lse_positions);
    return x;
  }
};

std::string run_rank(const RunConfig& cfg, Communicator& comm) {
  const Problem& p = cfg.problem;
  Recorder& rec = comm.recorder();
  if (cfg.step_hook) rec.set_step_hook([&](const std::string& phase, int step) { cfg.step_hook(comm, phase, step); });
  std::unique_ptr<Device> dev_owner;
#ifdef CPSIM_HAVE_CUDA
  if (on_gpu(cfg.backend))  // the launcher's GPU and streams
    dev_owner = make_cuda_device(rec, -1, parse_gpu_kernel(cfg.gpu_kernel));
#endif
  if (!dev_owner) dev_owner = std::make_unique<CpuDevice>(rec);
  Device& dev = *dev_owner;
  const SeqLayout L(p.ranks, p.seq, p.sharding);
  const int r = comm.rank();
  const std::int64_t s = L.local_len(), qe = p.heads * p.head_dim, ke = p.kv_heads * p.head_dim;

  // 1. This rank's shard of the seeded inputs.   q: [B, s, Nq, D]   k, v: [B, s, Nkv, D]
  auto q = seeded_rows(cfg.seed, kStreamQ, L, r, p.batch, qe, p.dtype);
  auto k = seeded_rows(cfg.seed, kStreamK, L, r, p.batch, ke, p.dtype);
  auto v = seeded_rows(cfg.seed, kStreamV, L, r, p.batch, ke, p.dtype);
  if (cfg.tamper) cfg.tamper(r, q, k, v);
  const Buffer qb = to_device(dev, q, {p.batch, s, p.heads, p.head_dim}, p.dtype, "q");
  const Buffer kb = to_device(dev, k, {p.batch, s, p.kv_heads, p.head_dim}, p.dtype, "k");
  const Buffer vb = to_device(dev, v, {p.batch, s, p.kv_heads, p.head_dim}, p.dtype, "v");

  // 2. Forward (and backward) through the strategy.
  auto strategy = make_strategy(cfg.strategy, comm, dev, p);
  RankResult res;
  rec.begin_phase("forward");
  LocalOutput o = strategy->forward(qb, kb, vb);
  dev.synchronize();
  rec.end_phase();
  res.out = to_host(dev, o.out);
  res.lse = to_host(dev, o.lse);
  res.lse_heads = o.lse.dims().n;
  res.lse_head0 = o.lse_head0;
  res.lse_positions = o.lse_positions;
  if (cfg.backward) {
    const auto dout = seeded_rows(cfg.seed, kStreamDout, L, r, p.batch, qe, p.dtype);
    const Buffer db = to_device(dev, dout, {p.batch, s, p.heads, p.head_dim}, p.dtype, "dout");
    rec.begin_phase("backward");
    LocalGrads g = strategy->backward(db);
    dev.synchronize();
    rec.end_phase();
    res.dq = to_host(dev, g.dq);
    res.dk = to_host(dev, g.dk);
    res.dv = to_host(dev, g.dv);
  }
  return res.serialize();
}

std::vector<double> seeded_global(const RunConfig& cfg, std::uint64_t stream, std::int64_t row_elems) {
  const Problem& p = cfg.problem;
  auto v = normals(cfg.seed, stream, static_cast<std::size_t>(p.batch * p.seq * row_elems));
  round_to(v, p.dtype);
  return v;
}

}  // namespace

GlobalTensors make_inputs(const RunConfig& cfg) {
  const Problem& p = cfg.problem;
  GlobalTensors t;
  t.q = seeded_global(cfg, kStreamQ, p.heads * p.head_dim);
  t.k = seeded_global(cfg, kStreamK, p.kv_heads * p.head_dim);
  t.v = seeded_global(cfg, kStreamV, p.kv_heads * p.head_dim);
  if (cfg.backward) t.dout = seeded_global(cfg, kStreamDout, p.heads * p.head_dim);
  return t;
}

RunResult run(const RunConfig& cfg) {
  const Problem& p = cfg.problem;
  validate(p, cfg.strategy);
  if (p.dtype == DType::bf16 && !on_gpu(cfg.backend))
    throw UsageError("bf16 needs a GPU device; use --dtype f32 or f64 on the " +
                     std::string(backend_name(cfg.backend)) + " backend");
  RunResult result;
  result.config = cfg;
  const auto t0 = std::chrono::steady_clock::now();
  LaunchOptions opt;
  opt.ranks = p.ranks;
  opt.backend = cfg.backend;
  opt.timeout = cfg.timeout;
  opt.tracing = cfg.tracing;
  announce_run(cfg);  // under mpirun, to the processes following rank 0's runs (mpi_runs.hpp)
  auto outcomes = launch(opt, [&](Communicator& comm) { return run_rank(cfg, comm); });
  result.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (outcomes.empty()) return result;  // not the reporting rank (MPI)

  // Assemble every rank's rows in global sequence order.
  const SeqLayout L(p.ranks, p.seq, p.sharding);
  std::vector<RankResult> rr;
  for (auto& o : outcomes) {
    rr.push_back(RankResult::deserialize(o.result));
    result.ranks.push_back(RankReport{o.rank, L.spans(o.rank), std::move(o.stats)});
  }
  auto gather = [&](auto field, std::int64_t row_elems) {
    std::vector<std::vector<double>> locals;
    for (const auto& x : rr) locals.push_back(x.*field);
    return unshard(L, locals, p.batch, row_elems);
  };
  GlobalTensors& t = result.tensors;
  t = make_inputs(cfg);
  t.out = gather(&RankResult::out, p.heads * p.head_dim);
  t.lse.assign(static_cast<std::size_t>(p.batch * p.heads * p.seq), 0.0);
  for (const auto& x : rr) {  // lse [B, nh, n] at heads [h0, h0+nh) and the listed positions
    const auto n = static_cast<std::int64_t>(x.lse_positions.size());
    for (std::int64_t b = 0; b < p.batch; ++b)
      for (std::int64_t h = 0; h < x.lse_heads; ++h)
        for (std::int64_t i = 0; i < n; ++i)
          t.lse[static_cast<std::size_t>((b * p.heads + x.lse_head0 + h) * p.seq + x.lse_positions[i])] =
              x.lse[static_cast<std::size_t>((b * x.lse_heads + h) * n + i)];
  }
  if (cfg.backward) {
    t.dq = gather(&RankResult::dq, p.heads * p.head_dim);
    t.dk = gather(&RankResult::dk, p.kv_heads * p.head_dim);
    t.dv = gather(&RankResult::dv, p.kv_heads * p.head_dim);
  }
  if (cfg.check) result.check = check_run(cfg, t);
  return result;
}

CheckReport check_run(const RunConfig& cfg, const GlobalTensors& t) {
  const Problem& p = cfg.problem;
  const AttentionShape shape{p.batch, p.seq, p.seq, p.heads, p.kv_heads, p.head_dim};
  const Positions pos = iota_positions(0, p.seq);
  CheckReport c;
  c.ran = true;
  const RefForward ref = reference_forward(t.q, t.k, t.v, shape, pos, pos, p.causal, p.scale);
  RefBackward refb;
  if (cfg.backward) refb = reference_backward(t.q, t.k, t.v, t.dout, shape, pos, pos, p.causal, p.scale);
  c.err.out = max_abs_error(t.out, ref.out);
  c.err.lse = max_abs_error(t.lse, ref.lse);
  if (cfg.backward) {
    c.err.dq = max_abs_error(t.dq, refb.dq);
    c.err.dk = max_abs_error(t.dk, refb.dk);
    c.err.dv = max_abs_error(t.dv, refb.dv);
  }
  bool gpu_passed = true;
#ifdef CPSIM_HAVE_CUDA
  if (on_gpu(cfg.backend)) {  // Transformer Engine's tolerances for bf16, tight ones for f32
    const GpuTolerance tol = gpu_tolerance(p.dtype, p.kv_heads != p.heads);
    auto close = [&](const std::vector<double>& g, const std::vector<double>& w, double& err, double& allowed) {
      const CloseCheck k = check_close(g, w, tol);
      err = k.max_abs_error;
      allowed = k.allowed;
      gpu_passed = gpu_passed && k.passed;
    };
    close(t.out, ref.out, c.err.out, c.allowed.out);
    close(t.lse, ref.lse, c.err.lse, c.allowed.lse);
    if (cfg.backward) {
      close(t.dq, refb.dq, c.err.dq, c.allowed.dq);
      close(t.dk, refb.dk, c.err.dk, c.allowed.dk);
      close(t.dv, refb.dv, c.err.dv, c.allowed.dv);
    }
    c.rule = tol.rule;
  } else
#endif
  if (p.dtype == DType::f64) {
    c.allowed = {kF64Tolerance, kF64Tolerance, kF64Tolerance, kF64Tolerance, kF64Tolerance};
    c.rule = "f64: every max abs error <= 1e-10";
  } else {
    // The single-process f32 tiled kernel on the same inputs; the run may be at most 2x as wrong (flash-attention's
    // rule), plus the rounding of the reference itself to float (FLT_EPSILON * max |reference|).
    Recorder rec;
    CpuDevice dev(rec);
    const Dims qd{p.batch, p.seq, p.heads, p.head_dim}, kd{p.batch, p.seq, p.kv_heads, p.head_dim};
    const Buffer q = to_device(dev, t.q, qd, DType::f32, "q"), k = to_device(dev, t.k, kd, DType::f32, "k"),
                 v = to_device(dev, t.v, kd, DType::f32, "v");
    const Buffer out = dev.alloc(qd, DType::f32, Layout::bsnd, "out");
    const Buffer lse = dev.alloc({p.batch, p.seq, p.heads, 1}, DType::f32, Layout::bns, "lse");
    const AttentionOptions opt{p.causal, p.scale, std::nullopt};
    dev.attention_forward(View(q), pos, View(k), View(v), pos, View(out), View(lse), opt);
    auto allowed = [](double base, const std::vector<double>& ref_t) {
      return 2 * base + FLT_EPSILON * max_abs_finite(ref_t);
    };
    c.baseline.out = max_abs_error(to_host(dev, out), ref.out);
    c.baseline.lse = max_abs_error(to_host(dev, lse), ref.lse);
    c.allowed.out = allowed(c.baseline.out, ref.out);
    c.allowed.lse = allowed(c.baseline.lse, ref.lse);
    if (cfg.backward) {
      const Buffer dout = to_device(dev, t.dout, qd, DType::f32, "dout");
      const Buffer dq = dev.alloc(qd, DType::f32, Layout::bsnd, "dq"), dk = dev.alloc(kd, DType::f32, Layout::bsnd, "dk"),
                   dv = dev.alloc(kd, DType::f32, Layout::bsnd, "dv");
      dev.attention_backward(View(q), pos, View(k), View(v), pos, View(out), View(lse), View(dout), View(dq), View(dk),
                             View(dv), opt);
      c.baseline.dq = max_abs_error(to_host(dev, dq), refb.dq);
      c.baseline.dk = max_abs_error(to_host(dev, dk), refb.dk);
      c.baseline.dv = max_abs_error(to_host(dev, dv), refb.dv);
      c.allowed.dq = allowed(c.baseline.dq, refb.dq);
      c.allowed.dk = allowed(c.baseline.dk, refb.dk);
      c.allowed.dv = allowed(c.baseline.dv, refb.dv);
    }
    c.rule = "f32: error <= 2 x the single-process f32 tiled kernel's error + FLT_EPSILON x max|reference|";
  }
  // Per-rank verdicts on the rows each rank owns.
  const SeqLayout L(p.ranks, p.seq, p.sharding);
  for (int r = 0; r < p.ranks; ++r) {
    double e = 0;
    auto rows = [&](const std::vector<double>& got, const std::vector<double>& want, std::int64_t row_elems) {
      for (std::int64_t b = 0; b < p.batch; ++b)
        for (const Span& sp : L.spans(r))
          for (std::int64_t i = (b * p.seq + sp.lo) * row_elems; i < (b * p.seq + sp.hi) * row_elems; ++i) {
            const double d = std::abs(got[static_cast<std::size_t>(i)] - want[static_cast<std::size_t>(i)]);
            e = std::isnan(d) ? INFINITY : std::max(e, d);
          }
    };
    rows(t.out, ref.out, p.heads * p.head_dim);
    if (cfg.backward) {
      rows(t.dq, refb.dq, p.heads * p.head_dim);
      rows(t.dk, refb.dk, p.kv_heads * p.head_dim);
      rows(t.dv, refb.dv, p.kv_heads * p.head_dim);
    }
    c.per_rank.push_back(e);
  }
  c.passed = c.err.out <= c.allowed.out && c.err.lse <= c.allowed.lse;
  if (cfg.backward) c.passed = c.passed && c.err.dq <= c.allowed.dq && c.err.dk <= c.allowed.dk && c.err.dv <= c.allowed.dv;
  if (on_gpu(cfg.backend)) c.passed = gpu_passed;
  return c;
}

}  // namespace cpsim
