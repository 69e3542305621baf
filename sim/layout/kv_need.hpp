// Which K/V rows each rank must receive under a mask: the need, that every scheme of moving K/V is measured against.
//
// Rank r needs key position k of another rank's shard when some query of r sees it (mask.hpp): k in
// [lo(q), hi(q)] for some q in positions(r). Those ranges' union, U(r), is a few intervals:
//   rows of one run of consecutive queries   one interval [lo(first), hi(last)]: every query sees itself, so
//                                            lo(q + 1) <= q + 1 <= hi(q) + 1 and the ranges touch
//   a strided run (striped)                  one range per query, merged where they touch (O(s))
// The rows rank r needs of owner o are positions(o) n U(r): a few ranges of o's local rows (two binary searches per
// interval). Nothing here is O(S) but the striped sharding's O(s) union.
//
// In bytes, for the forward: every needed row of K and of V,
//   need_fwd(r) = sum_{o != r} rows(r, o) * 2 B Nkv D * size(dtype)
// and for the backward, which needs the K/V again (no strategy keeps other ranks' K/V from its forward) and the
// partial dK/dV of its own rows that every other rank computed, in the accumulator dtype:
//   need_bwd(r) = need_fwd(r) + sum_{o != r} rows(o, r) * 2 B Nkv D * size(accum)
#pragma once
#include <cstdint>
#include <vector>

#include "sim/core/mask.hpp"
#include "sim/core/positions.hpp"
#include "sim/layout/layout.hpp"

namespace cpsim {

// The key positions the queries of `rank` see: ascending, disjoint, non-adjacent half-open spans.
std::vector<Span> visible_key_spans(const SeqLayout& layout, int rank, const Mask& mask);

// The rows of `owner`'s shard that some query of `rank` sees: local row ranges (Span of row indices, ascending) and
// their global positions. For owner == rank, the rows the rank sees of its own.
struct NeededRows {
  std::vector<Span> rows;  // [lo, hi) of owner's local rows
  Positions positions;     // the positions of those rows, ascending
  std::int64_t count = 0;  // rows in all
};
NeededRows needed_rows(const SeqLayout& layout, int rank, int owner, const Mask& mask);
// The same, from the spans visible_key_spans(layout, rank, mask) gave (when one rank's spans serve every owner).
NeededRows needed_rows(const SeqLayout& layout, const std::vector<Span>& seen, int owner);

// Rows of other ranks that `rank` needs, sum_{o != rank} rows(rank, o); and, per owner, rows(rank, o) (0 at rank).
std::vector<std::int64_t> needed_counts(const SeqLayout& layout, int rank, const Mask& mask);
std::int64_t needed_total(const SeqLayout& layout, int rank, const Mask& mask);

}  // namespace cpsim
