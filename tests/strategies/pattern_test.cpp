// What each strategy sends, computes and holds: the communication pattern, the balance, the memory, and the
// dependencies (a changed K/V chunk changes exactly the dQ of the queries that see it).
#include <doctest/doctest.h>

#include <algorithm>

#include "strategy_cases.hpp"

using namespace cpsim;
using test::config;

namespace {

std::int64_t calls(const RunResult& r, int rank, const std::string& kind) {
  return r.ranks[static_cast<std::size_t>(rank)].stats.comm_counts().count(kind);
}

// Counts of one phase: the forward-only run's counts, or (fwd+bwd) - (fwd) for the backward.
struct PhaseCalls {
  std::int64_t fwd, bwd;
};
PhaseCalls phase_calls(RunConfig c, int rank, const std::string& kind) {
  c.check = false;
  c.backward = false;
  const auto f = calls(run(c), rank, kind);
  c.backward = true;
  const auto fb = calls(run(c), rank, kind);
  return {f, fb - f};
}

WorkCounts phase_work(const Recorder& rec, const std::string& phase) {
  WorkCounts w;
  for (const auto& s : rec.step_work())
    if (s.phase == phase) w += s.work;
  return w;
}

}  // namespace

TEST_CASE("all_gather makes 2 all-gathers forward and 2 all-gathers + 2 reduce-scatters backward") {
  const RunConfig c = config(StrategyKind::all_gather, Sharding::zigzag, 4);
  for (int r = 0; r < 4; ++r) {
    const auto ag = phase_calls(c, r, "all_gather"), rs = phase_calls(c, r, "reduce_scatter");
    CHECK(ag.fwd == 2);
    CHECK(ag.bwd == 2);
    CHECK(rs.fwd == 0);
    CHECK(rs.bwd == 2);
  }
}

TEST_CASE("ulysses makes 4 all-to-alls forward (q, k, v, out) and 4 backward (dout, dq, dk, dv)") {
  RunConfig c = config(StrategyKind::ulysses, Sharding::zigzag, 2);
  const auto a = phase_calls(c, 1, "all_to_all");
  CHECK(a.fwd == 4);
  CHECK(a.bwd == 4);
  CHECK(phase_calls(c, 1, "isend").fwd == 0);
}

TEST_CASE("the ring sends C-1 K/V blocks forward and C-1 K/V plus C-1 dK/dV blocks backward") {
  for (int C : {1, 2, 4, 8}) {
    const RunConfig c = config(StrategyKind::ring, Sharding::zigzag, C);
    for (int r : {0, C - 1}) {
      const auto s = phase_calls(c, r, "isend"), v = phase_calls(c, r, "irecv");
      CHECK(s.fwd == C - 1);
      CHECK(v.fwd == C - 1);
      CHECK(s.bwd == 2 * (C - 1));
      CHECK(v.bwd == 2 * (C - 1));
    }
  }
}

TEST_CASE("the hybrid composes: A2A counts inside its group plus R-1 ring exchanges") {
  for (auto [C, A] : {std::pair{8, 2}, std::pair{8, 4}}) {
    RunConfig c = config(StrategyKind::hybrid, Sharding::zigzag, C);
    c.problem.a2a = A;
    c.problem.kv_heads = 8;
    const int R = C / A;
    const auto a2a = phase_calls(c, 3, "all_to_all"), s = phase_calls(c, 3, "isend");
    CHECK(a2a.fwd == 4);
    CHECK(a2a.bwd == 4);
    CHECK(s.fwd == R - 1);
    CHECK(s.bwd == 2 * (R - 1));
  }
}

TEST_CASE("ulysses moves (C-1)/C of each tensor per all-to-all, and KV replication shows in the bytes") {
  RunConfig c = config(StrategyKind::ulysses, Sharding::zigzag, 4, Backend::threads, false);
  c.check = false;
  c.problem.kv_heads = 4;
  c.problem.kv_replicate = false;
  const Problem& p = c.problem;
  const std::int64_t s = p.seq / p.ranks, q_bytes = p.batch * s * p.heads * p.head_dim * 8;
  const std::int64_t kv_bytes = p.batch * s * p.kv_heads * p.head_dim * 8;
  const RunResult plain = run(c);
  // q, out: Nq heads; k, v: Nkv heads. Each all-to-all sends (C-1)/C of the tensor.
  CHECK(plain.ranks[0].stats.comm_counts().bytes_sent == (2 * q_bytes + 2 * kv_bytes) * 3 / 4);
  c.problem.kv_heads = 2;
  c.problem.kv_replicate = true;  // each KV head on 2 ranks: k and v carry 4 heads again, as if Nkv were 4
  const RunResult rep = run(c);
  CHECK(rep.ranks[0].stats.comm_counts().bytes_sent == plain.ranks[0].stats.comm_counts().bytes_sent);
}

TEST_CASE("the zigzag ring gives every rank the same work at every step") {
  for (int C : {2, 4, 8}) {
    const RunResult r = run(config(StrategyKind::ring, Sharding::zigzag, C));
    for (const char* phase : {"forward", "backward"})
      for (int step = 0; step < C; ++step) {
        std::vector<std::int64_t> per_rank;
        for (const auto& rk : r.ranks)
          for (const auto& sw : rk.stats.step_work())
            if (sw.phase == phase && sw.step == step) per_rank.push_back(sw.work.pairs);
        REQUIRE(per_rank.size() == static_cast<std::size_t>(C));
        CHECK(std::all_of(per_rank.begin(), per_rank.end(), [&](auto x) { return x == per_rank[0]; }));
      }
  }
}

TEST_CASE("the contiguous ring computes blocks [1, 2, 3, 4] at C=4 and skips the rest") {
  const RunResult r = run(config(StrategyKind::ring, Sharding::contiguous, 4));
  for (int rank = 0; rank < 4; ++rank) {
    const WorkCounts w = phase_work(r.ranks[static_cast<std::size_t>(rank)].stats, "forward");
    CHECK(w.calls == rank + 1);
    CHECK(w.skipped_calls == 3 - rank);
  }
}

TEST_CASE("every strategy does the causal total of visible pairs, S(S+1)/2 per head and batch") {
  for (StrategyKind s : all_strategies()) {
    const RunResult r = run(config(s, Sharding::zigzag, 4));
    const Problem& p = r.config.problem;
    std::int64_t total = 0;
    for (const auto& rk : r.ranks) total += phase_work(rk.stats, "forward").pairs;
    CHECK(total == p.seq * (p.seq + 1) / 2 * p.heads * p.batch);
  }
}

TEST_CASE("all_gather holds the full K/V, the ring only O(S/C): peak memory at C=8") {
  auto peak = [](StrategyKind s, int C) {
    RunConfig c = config(s, Sharding::zigzag, C, Backend::threads, false);
    c.check = false;
    c.problem.seq = 32 * C;  // the same 32 local rows on every rank
    c.problem.kv_heads = 8;
    return static_cast<double>(run(c).ranks[0].stats.peak_bytes());
  };
  const double ring2 = peak(StrategyKind::ring, 2), ring8 = peak(StrategyKind::ring, 8);
  const double ag2 = peak(StrategyKind::all_gather, 2), ag8 = peak(StrategyKind::all_gather, 8);
  CHECK(ring8 == ring2);        // the ring's buffers depend on S/C only
  CHECK(ag8 > 2.0 * ag2);       // all_gather's grow with S
  CHECK(ag8 / ring8 > 2.5);     // at C=8 the full K/V copies dominate
  MESSAGE("peak bytes per rank at C=8: all_gather " << ag8 << ", ring " << ring8 << " (ratio " << ag8 / ring8 << ")");
}

TEST_CASE("changing one rank's late K/V chunk changes dQ only where queries see it") {
  // Zigzag, C=4: rank 0's second local half is chunk 7, the last; only the queries of chunk 7 (rank 0) see it.
  for (StrategyKind s : all_strategies()) {
    RunConfig c = config(s, Sharding::zigzag, 4);
    c.check = false;
    const RunResult base = run(c);
    c.tamper = [&](int rank, std::vector<double>&, std::vector<double>& k, std::vector<double>& v) {
      if (rank != 0) return;
      const std::size_t half = k.size() / 2 / static_cast<std::size_t>(c.problem.batch);  // rows [t, 2t) of batch 0
      for (std::size_t i = half; i < 2 * half; ++i) {
        k[i] += 0.5;
        v[i] -= 0.25;
      }
    };
    const RunResult mut = run(c);
    const Problem& p = c.problem;
    const SeqLayout L(p.ranks, p.seq, p.sharding);
    for (int r = 0; r < 4; ++r) {
      bool changed = false;
      for (std::int64_t b = 0; b < p.batch; ++b)
        for (const auto pos : L.positions(r))
          for (std::int64_t i = 0; i < p.heads * p.head_dim; ++i) {
            const auto at = static_cast<std::size_t>((b * p.seq + pos) * p.heads * p.head_dim + i);
            changed = changed || base.tensors.dq[at] != mut.tensors.dq[at];
          }
      INFO(strategy_name(s) << " rank " << r);
      CHECK(changed == (r == 0));
    }
  }
}

TEST_CASE("threads and processes give bitwise identical results") {
  for (StrategyKind s : all_strategies()) {
    RunConfig c = config(s, Sharding::zigzag, 4);
    c.check = false;
    const RunResult a = run(c);
    c.backend = Backend::processes;
    const RunResult b = run(c);
    INFO(strategy_name(s));
    CHECK(a.tensors.out == b.tensors.out);
    CHECK(a.tensors.lse == b.tensors.lse);
    CHECK(a.tensors.dq == b.tensors.dq);
    CHECK(a.tensors.dk == b.tensors.dk);
    CHECK(a.tensors.dv == b.tensors.dv);
  }
}
