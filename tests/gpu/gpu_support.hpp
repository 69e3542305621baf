// Helpers for the GPU tests: seeded inputs in the run's precision, a whole context-parallel run on a GPU launcher
// (written against launch_cuda_threads / launch_nccl and make_cuda_device directly), and the check against the f64
// reference under the GPU rule (sim/kernels/check.hpp).
#pragma once
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "sim/core/bf16.hpp"
#include "sim/core/bytes.hpp"
#include "sim/core/random.hpp"
#include "sim/cuda/launchers.hpp"
#include "sim/cuda/make_device.hpp"
#include "sim/cuda/probe.hpp"
#include "sim/kernels/check.hpp"
#include "sim/kernels/host_io.hpp"
#include "sim/runtime/inputs.hpp"
#include "sim/strategies/strategy.hpp"

namespace cpsim::test {

// n seeded values of one stream, as a buffer of this dtype holds them.
inline std::vector<double> seeded(std::uint64_t seed, std::uint64_t stream, std::size_t n, DType t) {
  std::vector<double> v = normals(seed, stream, n);
  for (double& x : v) x = round_to_dtype(x, t);
  return v;
}

// Checks one tensor; the message names it and the errors.
inline bool close_enough(const char* name, const std::vector<double>& got, const std::vector<double>& want,
                         const CheckRule& rule) {
  const TensorCheck c = check_tensor(got, want, rule);
  INFO(name << ": max abs error " << c.err << ", worst error / allowed " << c.worst << " (" << rule.words << ")");
  CHECK(c.passed);
  return c.passed;
}

struct GpuRun {
  StrategyKind strategy = StrategyKind::ring;
  Problem problem;
  bool backward = true;
  std::uint64_t seed = 7;
};

// The whole tensors of a run, in global sequence order.
struct GpuRunResult {
  std::vector<double> q, k, v, dout, out, lse, dq, dk, dv;
  std::vector<RankOutcome> outcomes;
};

using Launcher = std::function<std::vector<RankOutcome>(const LaunchOptions&, const RankFn&)>;

inline GpuRunResult run_on_gpu(const GpuRun& cfg, const Launcher& launcher) {
  const Problem& p = cfg.problem;
  const std::int64_t qe = p.heads * p.head_dim, ke = p.kv_heads * p.head_dim;
  GpuRunResult r;
  Inputs in = global_inputs(p, cfg.seed, cfg.backward);
  r.q = std::move(in.q);
  r.k = std::move(in.k);
  r.v = std::move(in.v);
  r.dout = std::move(in.dout);
  const SeqLayout L(p.ranks, p.seq, p.sharding);
  LaunchOptions opt;
  opt.ranks = p.ranks;
  opt.timeout = std::chrono::seconds(60);
  r.outcomes = launcher(opt, [&](Communicator& comm) {
    auto dev = make_cuda_device(comm.recorder());
    const int rank = comm.rank();
    const std::int64_t s = L.local_len();
    auto buffer = [&](const std::vector<double>& global, std::int64_t row, const char* name) {
      const Buffer b = dev->alloc({p.batch, s, row / p.head_dim, p.head_dim}, p.dtype, Layout::bsnd, name);
      upload_values(*dev, b, shard(L, global, p.batch, row, rank));
      return b;
    };
    const Buffer q = buffer(r.q, qe, "q"), k = buffer(r.k, ke, "k"), v = buffer(r.v, ke, "v");
    auto strategy = make_strategy(cfg.strategy, comm, *dev, p);
    const LocalOutput o = strategy->forward(q, k, v);
    ByteWriter w;
    w.put(download_values(*dev, o.out));
    w.put(download_values(*dev, o.lse));
    w.put<std::int64_t>(o.lse.dims().n);
    w.put(o.lse_head0);
    w.put(o.lse_positions.expand());
    if (cfg.backward) {
      const LocalGrads g = strategy->backward(buffer(r.dout, qe, "dout"));
      w.put(download_values(*dev, g.dq));
      w.put(download_values(*dev, g.dk));
      w.put(download_values(*dev, g.dv));
    }
    return w.take();
  });
  if (r.outcomes.empty()) return r;
  std::vector<std::vector<double>> out, dq, dk, dv;
  r.lse.assign(static_cast<std::size_t>(p.batch * p.heads * p.seq), 0.0);
  for (const RankOutcome& o : r.outcomes) {
    ByteReader rd(o.result);
    std::vector<double> x, lse;
    std::int64_t nh = 0, h0 = 0;
    std::vector<std::int64_t> pos;
    rd.get(x);
    out.push_back(x);
    rd.get(lse);
    rd.get(nh);
    rd.get(h0);
    rd.get(pos);
    const auto n = static_cast<std::int64_t>(pos.size());
    for (std::int64_t b = 0; b < p.batch; ++b)
      for (std::int64_t h = 0; h < nh; ++h)
        for (std::int64_t i = 0; i < n; ++i)
          r.lse[static_cast<std::size_t>((b * p.heads + h0 + h) * p.seq + pos[i])] =
              lse[static_cast<std::size_t>((b * nh + h) * n + i)];
    if (cfg.backward) {
      rd.get(x);
      dq.push_back(x);
      rd.get(x);
      dk.push_back(x);
      rd.get(x);
      dv.push_back(x);
    }
  }
  r.out = unshard(L, out, p.batch, qe);
  if (cfg.backward) {
    r.dq = unshard(L, dq, p.batch, qe);
    r.dk = unshard(L, dk, p.batch, ke);
    r.dv = unshard(L, dv, p.batch, ke);
  }
  return r;
}

inline std::string describe(const GpuRun& c) {
  const Problem& p = c.problem;
  return std::string(strategy_name(c.strategy)) + " " + std::string(sharding_name(p.sharding)) +
         " C=" + std::to_string(p.ranks) + " A=" + std::to_string(p.a2a_size(c.strategy)) + " " +
         std::string(dtype_name(p.dtype)) + " B=" + std::to_string(p.batch) + " S=" + std::to_string(p.seq) +
         " Nq/Nkv=" + std::to_string(p.heads) + "/" + std::to_string(p.kv_heads) + " D=" + std::to_string(p.head_dim) +
         (c.backward ? " fwd+bwd" : " fwd");
}

// Runs and checks out, lse (and dq, dk, dv) against the f64 reference on the same inputs.
inline void expect_matches_reference(const GpuRun& cfg, const Launcher& launcher) {
  INFO(describe(cfg));
  const Problem& p = cfg.problem;
  const GpuRunResult r = run_on_gpu(cfg, launcher);
  REQUIRE(r.outcomes.size() == static_cast<std::size_t>(p.ranks));
  const RefBackward got_b{r.dq, r.dk, r.dv};
  const CheckReport c = check_against_reference(whole_problem(p, Inputs{r.q, r.k, r.v, r.dout}),
                                                check_rule(p.dtype, true, p.kv_heads != p.heads),
                                                RefForward{r.out, r.lse}, cfg.backward ? &got_b : nullptr);
  INFO(c.rule << ": max abs errors out " << c.err.out << ", lse " << c.err.lse << ", dq " << c.err.dq << ", dk "
              << c.err.dk << ", dv " << c.err.dv << "; worst error / allowed out " << c.worst.out << ", lse "
              << c.worst.lse << ", dq " << c.worst.dq << ", dk " << c.worst.dk << ", dv " << c.worst.dv);
  CHECK(c.passed);
}

// A small problem every strategy can run at C ranks: S = 32 C, Nq = 8, Nkv = 8 (or 2 with GQA), D = 64.
inline GpuRun small_run(StrategyKind s, Sharding sh, int C, DType dtype, bool gqa = false) {
  GpuRun c;
  c.strategy = s;
  Problem& p = c.problem;
  p.ranks = C;
  p.sharding = sh;
  p.batch = 2;
  p.seq = 32 * C;
  p.heads = 8;
  p.kv_heads = gqa ? 2 : 8;
  p.head_dim = 64;
  p.dtype = dtype;
  if (s == StrategyKind::ulysses && p.kv_heads % C != 0) p.kv_replicate = true;
  if (s == StrategyKind::hybrid) {
    p.a2a = C >= 2 ? 2 : 1;
    if (p.kv_heads % p.a2a != 0) p.kv_replicate = true;
  }
  return c;
}

}  // namespace cpsim::test
