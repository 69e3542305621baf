// check_run: the f32 rule's allowance grows with the LSE merges a row goes through (check.hpp), and stays tight
// enough that a result one block off fails.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "sim/kernels/check.hpp"
#include "sim/runtime/run.hpp"

using namespace cpsim;

namespace {

RunConfig ring_f32(int C, std::int64_t seq, std::int64_t heads, std::int64_t kv_heads, std::int64_t D) {
  RunConfig cfg;
  cfg.strategy = StrategyKind::ring;
  cfg.problem.ranks = C;
  cfg.problem.seq = seq;
  cfg.problem.heads = heads;
  cfg.problem.kv_heads = kv_heads;
  cfg.problem.head_dim = D;
  cfg.problem.dtype = DType::f32;
  cfg.check = true;
  return cfg;
}

}  // namespace

TEST_CASE("a ring row merged C - 1 times passes the f32 check at C = 7, D = 3 (it failed at 9.4e-07 > 8.9e-07)") {
  const RunResult r = run(ring_f32(7, 84, 14, 7, 3));
  CHECK(r.check.err.out <= r.check.allowed.out);
  CHECK(r.check.passed);
}

TEST_CASE("the f32 ring passes forward and backward for C up to 16 and odd head dims, zigzag and contiguous") {
  for (int C : {2, 3, 5, 7, 8, 11, 16})
    for (std::int64_t D : {1, 3, 5, 7})
      for (Sharding sh : {Sharding::zigzag, Sharding::contiguous}) {
        RunConfig cfg = ring_f32(C, 6 * C, 2, 1, D);
        cfg.problem.sharding = sh;
        cfg.backward = C % 2 == 1;  // backward at the odd C, forward alone at the even ones
        CAPTURE(C);
        CAPTURE(D);
        CAPTURE(sharding_name(sh));
        const RunResult r = run(cfg);
        CHECK(r.check.err.out <= r.check.allowed.out);
        CHECK(r.check.err.lse <= r.check.allowed.lse);
        CHECK(r.check.err.dq <= r.check.allowed.dq);
        CHECK(r.check.err.dk <= r.check.allowed.dk);
        CHECK(r.check.err.dv <= r.check.allowed.dv);
        CHECK(r.check.passed);
      }
}

TEST_CASE("the merges' allowance stays far below what a dropped block changes: at C = 16 a row one block off fails") {
  RunConfig cfg = ring_f32(16, 16 * 8, 2, 2, 5);
  cfg.problem.sharding = Sharding::contiguous;
  const RunResult r = run(cfg);
  REQUIRE(r.check.passed);
  const Problem& p = cfg.problem;
  // The allowance is a small fraction of the values (15 merges add ~1.6e-5 of them, check.hpp).
  CHECK(r.check.allowed.out < 1e-3 * max_abs_finite(r.tensors.out));
  // The last query of head 0 as a ring that skipped its first step would leave it: attention over the keys of
  // blocks 1 .. C-1 only (positions S/C .. S-1), computed in double from the run's own inputs.
  // q, out: [B, S, Nq, D]; k, v: [B, S, Nkv, D]; B = 1, Nq = Nkv.
  GlobalTensors t = r.tensors;
  const std::int64_t S = p.seq, N = p.heads, D = p.head_dim, last = S - 1;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  auto at = [&](const std::vector<double>& x, std::int64_t s, std::int64_t d) {
    return x[static_cast<std::size_t>((s * N + 0) * D + d)];
  };
  double top = -INFINITY;
  std::vector<double> score;
  for (std::int64_t j = S / p.ranks; j <= last; ++j) {
    double dot = 0;
    for (std::int64_t d = 0; d < D; ++d) dot += at(t.q, last, d) * at(t.k, j, d);
    score.push_back(dot * scale);
    top = std::max(top, score.back());
  }
  double sum = 0;
  for (double& x : score) sum += (x = std::exp(x - top));
  for (std::int64_t d = 0; d < D; ++d) {
    double o = 0;
    for (std::size_t i = 0; i < score.size(); ++i)
      o += score[i] / sum * at(t.v, S / p.ranks + static_cast<std::int64_t>(i), d);
    t.out[static_cast<std::size_t>((last * N + 0) * D + d)] = o;
  }
  const CheckReport c = check_run(cfg, t);
  CHECK_FALSE(c.passed);
  CHECK(c.err.out > 10 * c.allowed.out);
}

TEST_CASE("a merged run is allowed more than one call, and only by the merges' rounding") {
  RunConfig ring = ring_f32(8, 64, 2, 2, 4);
  RunConfig ulysses = ring;
  ulysses.strategy = StrategyKind::ulysses;
  CHECK(ring.problem.lse_merges(StrategyKind::ring) == 7);
  CHECK(ring.problem.lse_merges(StrategyKind::ulysses) == 0);
  CHECK(ring.problem.lse_merges(StrategyKind::all_gather) == 0);
  ring.problem.a2a = 2;
  CHECK(ring.problem.lse_merges(StrategyKind::hybrid) == 3);  // a ring of C/A = 4
  ring.problem.a2a = 0;
  // The same inputs and results checked as one call (0 merges) and as a ring (7): the ring's bound is larger by
  // 7 merges' rounding of the out, FLT_EPSILON max|out| (max|lse| + 4) each (check.hpp).
  const RunResult r = run(ring);
  const CheckReport as_ring = check_run(ring, r.tensors), as_one = check_run(ulysses, r.tensors);
  const double max_out = max_abs_finite(r.tensors.out), max_lse = max_abs_finite(r.tensors.lse);
  CHECK(as_ring.allowed.out - as_one.allowed.out ==
        doctest::Approx(7 * 1.1920928955078125e-07 * max_out * (max_lse + 4)).epsilon(1e-3));
  CHECK(as_ring.allowed.lse - as_one.allowed.lse ==
        doctest::Approx(7 * 1.1920928955078125e-07 * (max_lse + 1)).epsilon(1e-3));
}
