#include "sim/layout/work_table.hpp"

#include <doctest/doctest.h>

using namespace cpsim;

TEST_CASE("the seed's balance table is computed: contiguous [2, 6, 10, 14] and zigzag [8, 8, 8, 8]") {
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
