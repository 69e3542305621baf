// Need against sent: the plain ring's redundancy by formula, the mask exchange receiving exactly the need, and the
// pruned ring's hops under a window.
#include "sim/strategies/kv_traffic.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "sim/layout/kv_need.hpp"
#include "sim/strategies/pruned_ring.hpp"
#include "strategy_cases.hpp"

using namespace cpsim;

namespace {

struct MaskCase {
  const char* name;
  bool causal;
  std::int64_t window;
  bool docs;
};
constexpr MaskCase kMasks[] = {{"causal", true, 0, false},    {"full", false, 0, false},
                               {"documents", true, 0, true},  {"window 7", true, 7, false},
                               {"documents, window 5", true, 5, true}, {"full, window 6", false, 6, false},
                               {"full, documents", false, 0, true}};

// A small run without the check (the mask tests check the numbers): S = 20C, GQA 2:1, forward and backward.
RunConfig traffic(StrategyKind s, Sharding sh, int C, const MaskCase& m, bool backward = true) {
  RunConfig c = test::config(s, sh, C, Backend::threads, backward);
  c.check = false;
  c.keep_outputs = false;
  Problem& p = c.problem;
  p.batch = 1;
  p.seq = 20 * C;
  p.heads = 4;
  p.kv_heads = 2;
  p.head_dim = 4;
  p.causal = m.causal;
  p.window = m.window;
  if (m.docs) {
    const std::int64_t u = 2 * C;
    p.docs.lengths = {4 * u, 2 * u, 3 * u, u};
  }
  return c;
}

std::int64_t received(const RunResult& r, int rank) {
  return r.ranks[static_cast<std::size_t>(rank)].stats.comm_counts().bytes_received;
}

}  // namespace

TEST_CASE("the mask exchange receives exactly the need on every rank, every mask x sharding x C in 2, 3, 4, 8") {
  for (int C : {2, 3, 4, 8})
    for (const MaskCase& m : kMasks)
      for (Sharding sh : all_shardings()) {
        const RunConfig c = traffic(StrategyKind::mask_exchange, sh, C, m);
        INFO(std::string(m.name), " ", sharding_name(sh), " C=", C);
        const RunResult r = run(c);
        const std::vector<KvNeed> need = kv_need(c.problem);
        for (int rank = 0; rank < C; ++rank) CHECK(received(r, rank) == need[static_cast<std::size_t>(rank)].total(true));
      }
}

TEST_CASE("the forward of the mask exchange receives exactly the forward need") {
  for (const MaskCase& m : kMasks) {
    const RunConfig c = traffic(StrategyKind::mask_exchange, Sharding::zigzag, 4, m, false);
    INFO(std::string(m.name));
    const RunResult r = run(c);
    const std::vector<KvNeed> need = kv_need(c.problem);
    for (int rank = 0; rank < 4; ++rank) CHECK(received(r, rank) == need[static_cast<std::size_t>(rank)].forward);
  }
}

TEST_CASE("the plain ring's redundancy follows its formula: causal zigzag (C-1)/(C-1-r/2) - 1, 1/3 in all") {
  // Rank r needs half of each of the r earlier ranks' blocks and all of the C-1-r later ones: C-1-r/2 blocks; the ring
  // sends it C-1 blocks. In all: C(C-1) sent against 3C(C-1)/4 needed.
  for (int C : {2, 3, 4, 8}) {
    const RunConfig c = traffic(StrategyKind::ring, Sharding::zigzag, C, kMasks[0], false);
    const RunResult r = run(c);
    const std::vector<KvNeed> need = kv_need(c.problem);
    const std::int64_t block = 2 * c.problem.batch * (c.problem.seq / C) * c.problem.kv_heads * c.problem.head_dim * 8;
    std::int64_t all_sent = 0, all_need = 0;
    for (int rank = 0; rank < C; ++rank) {
      CAPTURE(C);
      CAPTURE(rank);
      const std::int64_t n = need[static_cast<std::size_t>(rank)].forward;
      CHECK(received(r, rank) == (C - 1) * block);
      CHECK(2 * n == (2 * (C - 1) - rank) * block);
      CHECK(redundancy(received(r, rank), n) == doctest::Approx((C - 1.0) / (C - 1.0 - rank / 2.0) - 1.0));
      all_sent += received(r, rank);
      all_need += n;
    }
    CHECK(3 * all_sent == 4 * all_need);
  }
}

TEST_CASE("the plain ring's redundancy, causal contiguous: rank r needs r blocks of the C-1 it is sent") {
  const int C = 4;
  const RunConfig c = traffic(StrategyKind::ring, Sharding::contiguous, C, kMasks[0], false);
  const RunResult r = run(c);
  const std::vector<KvNeed> need = kv_need(c.problem);
  const std::int64_t block = 2 * c.problem.batch * (c.problem.seq / C) * c.problem.kv_heads * c.problem.head_dim * 8;
  for (int rank = 0; rank < C; ++rank) {
    CHECK(need[static_cast<std::size_t>(rank)].forward == rank * block);
    CHECK(received(r, rank) == (C - 1) * block);
  }
  CHECK(std::isinf(redundancy(received(r, 0), need[0].forward)));
}

TEST_CASE("the pruned ring with a window no longer than a chunk receives at most two neighbours' blocks per rank") {
  for (int C : {2, 3, 4, 8})
    for (Sharding sh : {Sharding::zigzag, Sharding::contiguous})
      for (bool causal : {true, false}) {
        const MaskCase m{causal ? "window 10" : "full, window 10", causal, 10, false};  // chunk: S/2C = 10 tokens
        const RunConfig c = traffic(StrategyKind::pruned_ring, sh, C, m, false);
        INFO(std::string(m.name), " ", sharding_name(sh), " C=", C);
        const RingRoute route = ring_route(c.problem.layout(), c.problem.mask());
        for (int o = 0; o < C; ++o) CHECK(route.hops(o) <= 2);  // to its two neighbours at most
        const RunResult r = run(c);
        const std::int64_t block =
            2 * c.problem.batch * (c.problem.seq / C) * c.problem.kv_heads * c.problem.head_dim * 8;
        for (int rank = 0; rank < C; ++rank) CHECK(received(r, rank) <= 2 * block);
      }
}

TEST_CASE("the pruned ring sends what the plain ring sends where the mask prunes nothing: causal or full zigzag") {
  for (int C : {2, 4, 8})
    for (const MaskCase& m : {kMasks[0], kMasks[1]}) {
      const RunConfig pr = traffic(StrategyKind::pruned_ring, Sharding::zigzag, C, m),
                      ring = traffic(StrategyKind::ring, Sharding::zigzag, C, m);
      const RingRoute route = ring_route(pr.problem.layout(), pr.problem.mask());
      for (int o = 0; o < C; ++o) CHECK(route.cw[static_cast<std::size_t>(o)] == C - 1);
      const RunResult a = run(pr), b = run(ring);
      // The forward is the ring's; the backward keeps the K/V block at the far end instead of carrying it home.
      const Problem& p = pr.problem;
      const std::int64_t block = 2 * p.batch * (p.seq / C) * p.kv_heads * p.head_dim * 8;  // f64
      for (int rank = 0; rank < C; ++rank) CHECK(received(a, rank) == received(b, rank) - (C > 1 ? block : 0));
    }
}

TEST_CASE("every block the pruned ring routes reaches every rank that needs it, and the route is the shortest") {
  for (int C : {3, 4, 8})
    for (const MaskCase& m : kMasks)
      for (Sharding sh : all_shardings()) {
        const RunConfig c = traffic(StrategyKind::pruned_ring, sh, C, m);
        const SeqLayout L = c.problem.layout();
        const RingRoute route = ring_route(L, c.problem.mask());
        for (int o = 0; o < C; ++o) {
          const int a = route.cw[static_cast<std::size_t>(o)], b = route.ccw[static_cast<std::size_t>(o)];
          CHECK(a + b <= C - 1);
          int far = 0;  // the farthest clockwise distance of a rank that needs o
          for (int d = 1; d < C; ++d) {
            const bool needs = needed_rows(L, (o + d) % C, o, c.problem.mask()).count > 0;
            if (needs) far = d;
            CHECK((!needs || d <= a || d >= C - b));
          }
          CHECK(a + b <= far);  // never longer than the clockwise ring alone
        }
      }
}
