// The counting run reports exactly what the numeric run reports: work per rank and per step, calls, messages and
// bytes, and peak memory, for every strategy and sharding, forward and backward.
#include "sim/model/count_run.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sim/model/clock.hpp"
#include "sim/model/counting_device.hpp"
#include "sim/model/machine.hpp"
#include "sim/runtime/run.hpp"

using namespace cpsim;
using namespace cpsim::model;

namespace {

struct Case {
  StrategyKind strategy;
  int ranks, a2a;
  bool replicate;
};

RunConfig numeric_config(const Case& c, Sharding sharding, DType dtype) {
  RunConfig cfg;
  cfg.strategy = c.strategy;
  cfg.backward = true;
  cfg.timeout = std::chrono::seconds(60);
  Problem& p = cfg.problem;
  p.ranks = c.ranks;
  p.sharding = sharding;
  p.batch = 2;
  p.seq = 40 * c.ranks;  // chunks of 20 rows: tiles of 128 straddle chunk edges in the gathered buffers
  p.heads = 4;
  p.kv_heads = c.replicate ? 1 : 2;
  p.head_dim = 8;
  p.dtype = dtype;
  p.a2a = c.a2a;
  p.kv_replicate = c.replicate;
  return cfg;
}

std::string describe(const RunConfig& c) {
  return std::string(strategy_name(c.strategy)) + " C=" + std::to_string(c.problem.ranks) +
         " A=" + std::to_string(c.problem.a2a) + " " + std::string(sharding_name(c.problem.sharding)) + " " +
         std::string(dtype_name(c.problem.dtype)) + (c.problem.kv_replicate ? " kv-replicate" : "");
}

void check_equal(const Recorder& counted, const Recorder& measured) {
  const WorkCounts& a = counted.total_work();
  const WorkCounts& b = measured.total_work();
  CHECK(a.calls == b.calls);
  CHECK(a.skipped_calls == b.skipped_calls);
  CHECK(a.tiles_computed == b.tiles_computed);
  CHECK(a.tiles_skipped == b.tiles_skipped);
  CHECK(a.pairs == b.pairs);
  CHECK(a.flops == b.flops);
  REQUIRE(counted.step_work().size() == measured.step_work().size());
  for (std::size_t i = 0; i < counted.step_work().size(); ++i) {
    const StepWork &x = counted.step_work()[i], &y = measured.step_work()[i];
    CHECK(x.phase == y.phase);
    CHECK(x.step == y.step);
    CHECK(x.work == y.work);
  }
  const CommCounts& c = counted.comm_counts();
  const CommCounts& d = measured.comm_counts();
  CHECK(c.calls == d.calls);
  CHECK(c.bytes_sent == d.bytes_sent);
  CHECK(c.bytes_received == d.bytes_received);
  CHECK(c.messages_sent == d.messages_sent);
  CHECK(c.messages_received == d.messages_received);
  CHECK(counted.peak_bytes() == measured.peak_bytes());
}

}  // namespace

TEST_CASE("a counting run reports the numeric run's work, calls, bytes and peak memory on every rank") {
  const Case cases[] = {
      {StrategyKind::all_gather, 4, 0, false}, {StrategyKind::ulysses, 2, 0, false},
      {StrategyKind::ulysses, 4, 0, true},     {StrategyKind::ring, 4, 0, false},
      {StrategyKind::ring, 3, 0, false},       {StrategyKind::hybrid, 4, 2, false},
      {StrategyKind::hybrid, 8, 4, true},      {StrategyKind::pruned_ring, 4, 0, false},
      {StrategyKind::mask_exchange, 3, 0, false},
  };
  for (const Case& c : cases)
    for (Sharding sh : {Sharding::zigzag, Sharding::contiguous})
      for (DType dt : {DType::f32, DType::f64}) {
        const RunConfig cfg = numeric_config(c, sh, dt);
        CAPTURE(describe(cfg));
        const RunResult measured = run(cfg);
        const CountResult counted = count_run(cfg.problem, cfg.strategy, {.backward = true, .slots = 2});
        REQUIRE(counted.ranks.size() == measured.ranks.size());
        for (std::size_t r = 0; r < counted.ranks.size(); ++r) {
          CAPTURE(r);
          check_equal(counted.ranks[r], measured.ranks[r].stats);
        }
      }
}

TEST_CASE("under documents and a window the counting run reports the numeric run's work, tiles and bytes") {
  const Case cases[] = {{StrategyKind::all_gather, 4, 0, false},
                        {StrategyKind::ulysses, 4, 0, true},
                        {StrategyKind::ring, 4, 0, false},
                        {StrategyKind::hybrid, 4, 2, false},
                        {StrategyKind::pruned_ring, 4, 0, false},
                        {StrategyKind::mask_exchange, 4, 0, false}};
  for (const Case& c : cases)
    for (Sharding sh : {Sharding::zigzag, Sharding::striped, Sharding::balanced})
      for (std::int64_t W : {0, 24}) {
        RunConfig cfg = numeric_config(c, sh, DType::f64);
        cfg.problem.docs.lengths = {48, 16, 72, 24};  // S = 160 = 40 C; multiples of 2C
        cfg.problem.window = W;
        CAPTURE(describe(cfg));
        CAPTURE(W);
        const RunResult measured = run(cfg);
        const CountResult counted = count_run(cfg.problem, cfg.strategy, {.backward = true, .slots = 2});
        REQUIRE(counted.ranks.size() == measured.ranks.size());
        for (std::size_t r = 0; r < counted.ranks.size(); ++r) {
          CAPTURE(r);
          check_equal(counted.ranks[r], measured.ranks[r].stats);
        }
      }
}

TEST_CASE("the program of every rank carries the work and bytes its recorder counted") {
  Problem p;
  p.ranks = 4;
  p.seq = 256;
  p.heads = 4;
  p.kv_heads = 4;
  p.head_dim = 8;
  p.dtype = DType::bf16;
  for (StrategyKind k : all_strategies()) {
    CAPTURE(strategy_name(k));
    p.a2a = k == StrategyKind::hybrid ? 2 : 0;
    const CountResult res = count_run(p, k);
    for (std::size_t r = 0; r < res.ranks.size(); ++r) {
      double flops = 0;
      std::int64_t pairs = 0, isend_bytes = 0, irecv_bytes = 0, collectives = 0, waits = 0, posts = 0;
      for (const Op& op : res.programs.ranks[r].expand()) {
        if (op.kind == OpKind::attention) {
          flops += op.flops;
          pairs += op.pairs;
        }
        if (op.kind == OpKind::isend) isend_bytes += op.bytes, ++posts;
        if (op.kind == OpKind::irecv) irecv_bytes += op.bytes, ++posts;
        if (op.kind == OpKind::wait) ++waits;
        if (op.kind == OpKind::collective) ++collectives;
      }
      const Recorder& rec = res.ranks[r];
      CHECK(flops == rec.total_work().flops);
      CHECK(pairs == rec.total_work().pairs);
      CHECK(waits == posts);  // every request is completed exactly once
      const CommCounts& c = rec.comm_counts();
      CHECK(posts == c.count("isend") + c.count("irecv"));
      CHECK(collectives == c.count("all_gather") + c.count("reduce_scatter") + c.count("all_to_all"));
      if (k == StrategyKind::ring) {  // the ring moves its bytes by isend / irecv only
        CHECK(isend_bytes == c.bytes_sent);
        CHECK(irecv_bytes == c.bytes_received);
      }
    }
  }
}

TEST_CASE("tile counts follow the tiled kernel: a causal square of 3 tiles computes 6 and skips 3") {
  const Positions p = iota_positions(0, 3 * 128);
  const TileCounts c = tile_counts(p, p, true, 128);
  CHECK(c.computed == 6);
  CHECK(c.skipped == 3);
  const TileCounts full = tile_counts(p, p, false, 128);
  CHECK(full.computed == 9);
  CHECK(full.skipped == 0);
}

TEST_CASE("tile counts equal a pair-by-pair count for every shard shape and mask, asked once or again") {
  // The definition: a (query tile, key tile) pair is computed when one of its pairs is visible. Shards as the
  // layouts make them (contiguous, zigzag's two runs, striped, striped blocks), under each kind of mask, with tiles
  // of 4 rows so that a call of 300 rows has the 64 query tiles and more that are counted once and kept.
  const auto brute = [](const Positions& q, const Positions& k, const Mask& m, std::int64_t t) {
    const std::vector<std::int64_t> qs = q.expand(), ks = k.expand();
    const std::int64_t qt = (q.size() + t - 1) / t, kt = (k.size() + t - 1) / t;
    std::vector<char> seen(static_cast<std::size_t>(qt * kt), 0);
    for (std::size_t i = 0; i < qs.size(); ++i)
      for (std::size_t j = 0; j < ks.size(); ++j)
        if (m.visible(qs[i], ks[j])) seen[static_cast<std::size_t>(static_cast<std::int64_t>(i) / t * kt +
                                                                  static_cast<std::int64_t>(j) / t)] = 1;
    const std::int64_t computed = std::count(seen.begin(), seen.end(), 1);
    return TileCounts{computed, qt * kt - computed};
  };
  Positions zigzag_a, zigzag_b, blocks;
  zigzag_a.append(PosRun{0, 150, 1, 1});
  zigzag_a.append(PosRun{1050, 150, 1, 1});
  zigzag_b.append(PosRun{150, 150, 1, 1});
  zigzag_b.append(PosRun{900, 150, 1, 1});
  blocks.append(PosRun{2, 300, 8, 2});
  const std::vector<Positions> shards = {Positions::range(0, 300), Positions::range(300, 300), zigzag_a, zigzag_b,
                                         Positions({1, 5, 9, 13, 17, 21}), blocks};
  Positions striped_1, striped_3;
  striped_1.append(PosRun{1, 300, 4, 1});
  striped_3.append(PosRun{3, 300, 4, 1});
  std::vector<Positions> all = shards;
  all.push_back(striped_1);
  all.push_back(striped_3);
  const std::vector<Mask> masks = {Mask(true), Mask(false), Mask(true, 40, {}), Mask(false, 40, {}),
                                   Mask(true, 0, {0, 100, 700, 1200}), Mask(true, 16, {0, 350, 1200})};
  for (const Mask& m : masks)
    for (const Positions& q : all)
      for (const Positions& k : all)
        for (int again = 0; again < 2; ++again) {
          const TileCounts got = tile_counts(q, k, m, 4), want = brute(q, k, m, 4);
          CAPTURE(m.describe());
          CAPTURE(q.text());
          CAPTURE(k.text());
          CHECK(got.computed == want.computed);
          CHECK(got.skipped == want.skipped);
        }
}

TEST_CASE("the counting device keeps a bf16 log-sum-exp in f32, as the GPU does, and counts its merges so") {
  Problem p;
  p.ranks = 2;
  p.seq = 512;
  p.heads = p.kv_heads = 4;
  p.head_dim = 64;
  p.dtype = DType::bf16;
  const CountResult r = count_run(p, StrategyKind::ring, {.backward = false, .slots = 1});
  int merges = 0;
  for (const Op& op : r.programs.ranks[0].expand())
    if (op.kind == OpKind::memory && op.name == "merge") {
      ++merges;
      // Accumulator and block, bf16 (2 bytes), and their log-sum-exps, f32 (4 bytes): 3 passes of each.
      const std::int64_t out = op.elements, lse = op.elements / p.head_dim;
      CHECK(op.bytes == 3 * 2 * out + 3 * 4 * lse);
    }
  CHECK(merges == 1);
}

TEST_CASE("the clock sees what pruning saves: under a window of one chunk the pruned ring and the exchange beat the ring") {
  // 8 ranks on one H100 node, bf16, S = 64K, a window of S/2C = 4096 tokens: a rank needs its two neighbours only.
  Problem p;
  p.ranks = 8;
  p.seq = 64 << 10;
  p.heads = p.kv_heads = 8;
  p.head_dim = 128;
  p.dtype = DType::bf16;
  p.window = p.seq / (2 * p.ranks);
  const Machine m = load_machine("h100-sxm-8");
  double total[3] = {};
  std::int64_t received[3] = {};
  const StrategyKind kinds[3] = {StrategyKind::ring, StrategyKind::pruned_ring, StrategyKind::mask_exchange};
  for (int i = 0; i < 3; ++i) {
    const CountResult c = count_run(p, kinds[i], {.backward = true, .slots = 2, .step_work = false});
    total[i] = simulate(c.programs, m).total_us;
    for (const Recorder& r : c.ranks) received[i] = std::max(received[i], r.comm_counts().bytes_received);
  }
  const std::int64_t block = 2 * (p.seq / p.ranks) * p.kv_heads * p.head_dim * 2;  // one rank's K and V, bf16
  CHECK(received[0] == 2 * (p.ranks - 1) * block + (p.ranks - 1) * 2 * block);  // K/V twice, dK/dV in f32
  CHECK(received[1] <= 2 * block + 2 * 2 * block);  // two blocks forward, their dK/dV back (the far end keeps K/V)
  CHECK(received[2] < received[1]);                 // rows, not blocks
  CHECK(total[1] < total[0]);
  CHECK(total[2] < total[0]);
}
