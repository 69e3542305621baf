// Counting at scale: the unchanged strategies on hundreds of counting ranks and a million tokens, where every
// visible (query, key) pair must be computed exactly once, on exactly one rank; and the programs they issue, whose
// memory grows with the rank count C while the ops they issue grow with C^2.
#include <doctest/doctest.h>

#include "sim/model/clock.hpp"
#include "sim/model/count_run.hpp"

using namespace cpsim;
using namespace cpsim::model;

namespace {

Problem big(int ranks, std::int64_t seq) {
  Problem p;
  p.ranks = ranks;
  p.seq = seq;
  p.batch = 1;
  p.heads = p.kv_heads = 64;
  p.head_dim = 128;
  p.dtype = DType::bf16;
  return p;
}

// Causal attention over S positions sees S (S+1) / 2 pairs per (batch, head).
std::int64_t causal_pairs(const Problem& p) {
  return p.batch * p.heads * p.seq * (p.seq + 1) / 2;
}

void check_every_pair_once(const Problem& p, StrategyKind k) {
  const CountResult c = count_run(p, k, {.backward = true});
  std::int64_t fwd = 0, bwd = 0;
  for (const Recorder& r : c.ranks)
    for (const StepWork& s : r.step_work()) (s.phase == "forward" ? fwd : bwd) += s.work.pairs;
  CHECK(fwd == causal_pairs(p));
  CHECK(bwd == causal_pairs(p));
  const ModeledRun run = simulate(c.programs, load_machine("h100-ib"));
  CHECK(run.total_us > run.forward_us);
  CHECK(run.forward_us > 0);
}

}  // namespace

TEST_CASE("64 counting ranks at S = 256K compute every visible pair exactly once in every strategy") {
  for (StrategyKind k : {StrategyKind::all_gather, StrategyKind::ring, StrategyKind::hybrid}) {
    CAPTURE(strategy_name(k));
    Problem p = big(64, 256 << 10);
    p.a2a = k == StrategyKind::hybrid ? 8 : 0;
    check_every_pair_once(p, k);
  }
  Problem p = big(64, 256 << 10);  // Ulysses needs 64 | heads
  check_every_pair_once(p, StrategyKind::ulysses);
}

namespace {

// The ring issues O(C^2) ops in all (C steps on each of C ranks); held one Op each, 1024 ranks took 4 GB. Stored
// as repeated segments, each rank holds the same few dozen ops at any C: a bound of kStoredPerRank x C on the
// stored ops, which the ops issued exceed many times over.
constexpr std::size_t kStoredPerRank = 100;

void check_programs_linear(int ranks, bool backward) {
  Problem p = big(ranks, std::int64_t{ranks} * 2048);
  const CountResult c = count_run(p, StrategyKind::ring, {.backward = backward});
  std::int64_t issued = 0;
  std::size_t stored = 0;
  for (const Program& prog : c.programs.ranks) {
    issued += prog.size();
    stored += prog.stored();
    CHECK(prog.stored() <= kStoredPerRank);
  }
  const auto C = static_cast<std::int64_t>(ranks);
  CHECK(issued >= 5 * C * (C - 1));  // forward: 2 posts, 2 waits and a block per step (and the backward's more)
  CHECK(stored <= kStoredPerRank * static_cast<std::size_t>(ranks));
  CHECK(static_cast<std::int64_t>(stored) * 20 < issued);
}

}  // namespace

TEST_CASE("256 ring ranks issue O(C^2) ops but hold O(C): a few dozen stored ops per rank") {
  check_programs_linear(256, true);
}

TEST_CASE("1024 ring ranks hold the same few dozen ops per rank as 256 do" * doctest::test_suite("slow")) {
  check_programs_linear(1024, false);
}

TEST_CASE("256 counting ranks at S = 1M run the ring and the 4x64 mesh" * doctest::test_suite("slow")) {
  check_every_pair_once(big(256, 1 << 20), StrategyKind::ring);
  Problem p = big(256, 1 << 20);
  p.a2a = 4;
  check_every_pair_once(p, StrategyKind::hybrid);
}
