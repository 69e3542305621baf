// The ring's visible-block rule, the one function its forward and backward both compute from.
#include "sim/strategies/ring.hpp"

#include <doctest/doctest.h>

#include "sim/core/positions.hpp"

using namespace cpsim;

namespace {

// Visible (query, key) pairs of the rank's rows against the owner's, counted from the positions alone.
std::int64_t pairs_of(const SeqLayout& L, int rank, int owner, bool causal) {
  return visible_pairs(L.positions(rank), L.positions(owner), causal);
}

}  // namespace

TEST_CASE("zigzag blocks: the diagonal, the early key chunk for earlier owners, the late query chunk for later ones") {
  const SeqLayout L(4, 32, Sharding::zigzag);  // t = 4 rows per chunk, 8 rows per rank
  const RingBlock diag = visible_block(L, 2, 2, true), half_kv = visible_block(L, 2, 0, true),
                  half_q = visible_block(L, 2, 3, true);
  CHECK(diag.kind == BlockKind::diagonal);
  CHECK((diag.q0 == 0 && diag.nq == 8 && diag.nk == 8));
  CHECK(half_kv.kind == BlockKind::half_kv);
  CHECK((half_kv.q0 == 0 && half_kv.nq == 8 && half_kv.nk == 4));
  CHECK(half_q.kind == BlockKind::half_q);
  CHECK((half_q.q0 == 4 && half_q.nq == 4 && half_q.nk == 8));
}

TEST_CASE("contiguous blocks: the diagonal, whole blocks of earlier owners, and later owners skipped") {
  const SeqLayout L(4, 32, Sharding::contiguous);
  CHECK(visible_block(L, 1, 1, true).kind == BlockKind::diagonal);
  const RingBlock full = visible_block(L, 3, 1, true), skip = visible_block(L, 1, 3, true);
  CHECK(full.kind == BlockKind::full);
  CHECK((full.q0 == 0 && full.nq == 8 && full.nk == 8));
  CHECK(skip.kind == BlockKind::skipped);
  CHECK((skip.nq == 0 && skip.nk == 0));
}

TEST_CASE("without the causal mask every block is whole") {
  for (Sharding sh : {Sharding::zigzag, Sharding::contiguous}) {
    const SeqLayout L(4, 32, sh);
    for (int owner = 0; owner < 4; ++owner) {
      const RingBlock b = visible_block(L, 1, owner, false);
      CHECK(b.kind == BlockKind::full);
      CHECK((b.q0 == 0 && b.nq == 8 && b.nk == 8));
    }
  }
}

TEST_CASE("every visible block holds every visible pair of its rank and owner, and no pair more than needed") {
  for (Sharding sh : {Sharding::zigzag, Sharding::contiguous})
    for (int C : {1, 2, 3, 4, 8}) {
      const SeqLayout L(C, 4 * C, sh);
      for (int r = 0; r < C; ++r)
        for (int o = 0; o < C; ++o) {
          CAPTURE(C);
          CAPTURE(r);
          CAPTURE(o);
          const RingBlock b = visible_block(L, r, o, true);
          const Positions q = slice(L.positions(r), b.q0, b.nq), k = slice(L.positions(o), 0, b.nk);
          // The block's rows see as many pairs as the whole rows do: nothing visible is left out.
          CHECK(visible_pairs(q, k, true) == pairs_of(L, r, o, true));
          // Off the diagonal a block is wholly visible (no masked work) or skipped.
          if (r != o && b.kind != BlockKind::skipped) CHECK(visible_pairs(q, k, true) == b.nq * b.nk);
        }
    }
}
