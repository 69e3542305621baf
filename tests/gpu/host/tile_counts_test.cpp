// The kernel tiles the CUDA device reports, from positions alone (no GPU needed).
#include "sim/cuda/tile_counts.hpp"

#include <doctest/doctest.h>

#include "sim/layout/layout.hpp"

using namespace cpsim;
using cuda::count_tiles;

TEST_CASE("a causal diagonal block of two 64-row tiles computes three tile pairs and skips one") {
  const Positions p = iota_positions(0, 128);
  CHECK(count_tiles(p, p, true, 64, 64).computed == 3);
  CHECK(count_tiles(p, p, true, 64, 64).skipped == 1);
  CHECK(count_tiles(p, p, false, 64, 64).computed == 4);
  CHECK(count_tiles(p, p, false, 64, 64).skipped == 0);
}

TEST_CASE("queries before every key skip everything; row tiles count their 32-key chunks") {
  CHECK(count_tiles(iota_positions(0, 64), iota_positions(64, 64), true, 64, 64).computed == 0);
  CHECK(count_tiles(iota_positions(0, 64), iota_positions(64, 64), true, 64, 64).skipped == 1);
  // Row i of 0..63 sees keys 0..i: one chunk of 32 for rows 0..31, two for rows 32..63.
  const TileCounts t = count_tiles(iota_positions(0, 64), iota_positions(0, 64), true, 1, 32);
  CHECK(t.computed == 32 + 64);
  CHECK(t.skipped == 32);
}

TEST_CASE("zigzag blocks: the early chunk of rank 1 sees none of rank 2's keys") {
  const SeqLayout L(4, 512, Sharding::zigzag);  // rank 1: [64, 128) and [384, 448); rank 2: [128, 192), [320, 384)
  const TileCounts t = count_tiles(L.positions(1), L.positions(2), true, 64, 64);
  CHECK(t.computed == 2);  // the late q tile sees both key tiles
  CHECK(t.skipped == 2);
}
