#include "sim/layout/work_table.hpp"

#include <doctest/doctest.h>

#include "sim/core/error.hpp"
#include "sim/layout/documents.hpp"

using namespace cpsim;

TEST_CASE("the handbook chapter's balance table is computed: contiguous [2, 6, 10, 14] and zigzag [8, 8, 8, 8]") {
  CHECK(chunk_blocks(SeqLayout(4, 64, Sharding::contiguous)) == std::vector<double>{2, 6, 10, 14});
  CHECK(chunk_blocks(SeqLayout(4, 64, Sharding::zigzag)) == std::vector<double>{8, 8, 8, 8});
}

TEST_CASE("chunk blocks: contiguous grows as 4r+2, zigzag is flat at 2C, for C in 2, 4, 8") {
  for (int C : {2, 4, 8}) {
    const auto contiguous = chunk_blocks(SeqLayout(C, 4 * C, Sharding::contiguous));
    const auto zigzag = chunk_blocks(SeqLayout(C, 4 * C, Sharding::zigzag));
    for (int r = 0; r < C; ++r) {
      CHECK(contiguous[r] == doctest::Approx(4 * r + 2));
      CHECK(zigzag[r] == doctest::Approx(2 * C));
    }
  }
}

TEST_CASE("the chapter's counts follow from the visible pairs: t x t blocks (pairs - t)/t^2, ring blocks r + 1") {
  for (int C : {2, 4, 8})
    for (Sharding sh : {Sharding::contiguous, Sharding::zigzag}) {
      const std::int64_t t = 3, s = 2 * t;
      const SeqLayout L(C, 2 * C * t, sh);
      const auto pairs = visible_pairs_per_rank(L);
      const auto blocks = chunk_blocks(L);
      const auto ring = ring_blocks(L);
      for (int r = 0; r < C; ++r) {
        CHECK(blocks[r] == doctest::Approx(double(pairs[r] - t) / double(t * t)));       // cmd_layout's footnote
        if (sh == Sharding::contiguous) CHECK(pairs[r] == r * s * s + s * (s + 1) / 2);  // lesson 3: r+1 blocks
        if (sh == Sharding::contiguous) CHECK(ring[r] == r + 1);
      }
    }
}

TEST_CASE("a ring over contiguous sharding computes r+1 blocks on rank r, zigzag computes C everywhere") {
  CHECK(ring_blocks(SeqLayout(4, 64, Sharding::contiguous)) == std::vector<int>{1, 2, 3, 4});
  for (int C : {2, 4, 8}) {
    const auto c = ring_blocks(SeqLayout(C, 8 * C, Sharding::contiguous));
    const auto z = ring_blocks(SeqLayout(C, 8 * C, Sharding::zigzag));
    for (int r = 0; r < C; ++r) {
      CHECK(c[r] == r + 1);
      CHECK(z[r] == C);
    }
  }
}

TEST_CASE("zigzag ring steps cost 2t^2 + t pairs at step 0 and 2t^2 after, summing to S(S+1)/2") {
  for (int C : {2, 4, 8}) {
    const std::int64_t t = 5, S = 2 * C * t;
    const auto steps = ring_step_pairs(SeqLayout(C, S, Sharding::zigzag));
    std::int64_t total = 0;
    for (int r = 0; r < C; ++r) {
      CHECK(steps[r][0] == 2 * t * t + t);
      for (int i = 1; i < C; ++i) CHECK(steps[r][i] == 2 * t * t);
      for (auto p : steps[r]) total += p;
    }
    CHECK(total == S * (S + 1) / 2);
  }
}

TEST_CASE("visible pairs per rank are exact and add up to the causal total") {
  for (int C : {2, 4, 8}) {
    const std::int64_t S = 16 * C;
    for (Sharding sh : {Sharding::zigzag, Sharding::contiguous}) {
      const auto pairs = visible_pairs_per_rank(SeqLayout(C, S, sh));
      std::int64_t total = 0;
      for (auto p : pairs) total += p;
      CHECK(total == S * (S + 1) / 2);
    }
    const auto z = visible_pairs_per_rank(SeqLayout(C, S, Sharding::zigzag));
    for (auto p : z) CHECK(p == z[0]);
  }
}

TEST_CASE("imbalance is max over mean") {
  CHECK(imbalance(std::vector<double>{2, 6, 10, 14}) == doctest::Approx(14.0 / 8.0));
  CHECK(imbalance(std::vector<double>{8, 8, 8, 8}) == doctest::Approx(1.0));
}

namespace {
LayoutOptions with_documents(const DocSpec& spec, std::int64_t S, int C, bool causal = true, std::int64_t W = 0) {
  LayoutOptions o;
  o.docs = resolve_documents(spec, S, C);
  o.mask = make_mask(causal, W, o.docs);
  return o;
}
const ShardingWork& find(const std::vector<ShardingWork>& all, Sharding s) {
  for (const ShardingWork& w : all)
    if (w.sharding == s) return w;
  throw Error("no such sharding in the comparison");
}
}  // namespace

TEST_CASE("per-document zigzag is balanced (1.00) when every document is divisible by 2C, global zigzag is not") {
  for (int C : {2, 3, 4, 8})
    for (std::uint64_t seed : {1, 2, 3}) {
      CAPTURE(C);
      CAPTURE(seed);
      DocSpec spec;
      spec.random = 8;
      spec.seed = seed;
      const std::int64_t S = 2 * C * 64;
      const LayoutOptions o = with_documents(spec, S, C);
      for (std::int64_t L : o.docs.lengths) REQUIRE(L % (2 * C) == 0);
      const auto all = compare_shardings(C, S, o);
      const ShardingWork& doc = find(all, Sharding::zigzag);
      REQUIRE(doc.why_not.empty());
      CHECK(doc.imbalance == doctest::Approx(1.0));
      std::int64_t total = 0, want = 0;
      for (std::int64_t p : doc.per_rank) total += p;
      for (std::int64_t L : o.docs.lengths) want += L * (L + 1) / 2;
      CHECK(total == want);  // every sharding does the mask's pairs, no more
      CHECK(find(all, Sharding::global_zigzag).imbalance > 1.05);
      CHECK(find(all, Sharding::balanced).imbalance <= find(all, Sharding::global_zigzag).imbalance);
    }
}

TEST_CASE("every sharding's per-rank and per-step pairs sum to the mask's total under every mask") {
  const int C = 4;
  const std::int64_t S = 128;
  DocSpec spec;
  spec.lengths = {48, 16, 40, 24};
  for (std::int64_t W : {0, 9})
    for (bool causal : {true, false})
      for (bool docs : {false, true}) {
        const LayoutOptions o = docs ? with_documents(spec, S, C, causal, W) : [&] {
          LayoutOptions x;
          x.mask = Mask(causal, W, {});
          return x;
        }();
        const Positions all_pos = Positions::range(0, S);
        const std::int64_t want = visible_pairs(all_pos, all_pos, o.mask);
        for (const ShardingWork& w : compare_shardings(C, S, o)) {
          CAPTURE(w.name);
          CAPTURE(o.mask.describe());
          REQUIRE(w.why_not.empty());
          std::int64_t total = 0, steps = 0;
          for (int r = 0; r < C; ++r) {
            total += w.per_rank[static_cast<std::size_t>(r)];
            for (std::int64_t p : w.steps[static_cast<std::size_t>(r)]) steps += p;
          }
          CHECK(total == want);
          CHECK(steps == want);
        }
      }
}

TEST_CASE("under a window striped sharding balances every ring step, contiguous leaves the later ranks idle") {
  const int C = 4;
  const std::int64_t S = 4096;
  LayoutOptions o;
  o.mask = Mask(true, 256, {});
  const auto all = compare_shardings(C, S, o);
  CHECK(find(all, Sharding::striped).imbalance == doctest::Approx(1.0).epsilon(0.01));
  CHECK(find(all, Sharding::striped).ring_imbalance < 1.02);
  // Contiguous: a window shorter than S/C keeps every rank on its own block and its left neighbour's.
  const auto steps = step_imbalances(find(all, Sharding::contiguous).steps);
  CHECK(steps[0] == doctest::Approx(1.0).epsilon(0.05));
  const auto& c = find(all, Sharding::contiguous).steps;
  for (int r = 0; r < C; ++r)
    for (int i = 2; i < C; ++i) CHECK(c[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)] == 0);
}

TEST_CASE("a layout that cannot exist is reported with its constraint beside the ones that can") {
  DocSpec spec;
  spec.lengths = {20, 44};  // not multiples of 2C = 8
  const LayoutOptions o = with_documents(spec, 64, 4);
  const auto all = compare_shardings(4, 64, o);
  CHECK_FALSE(find(all, Sharding::zigzag).why_not.empty());
  CHECK(find(all, Sharding::zigzag).why_not.find("--pad-docs") != std::string::npos);
  CHECK(find(all, Sharding::striped).why_not.empty());
}
