// The pruned ring: ring attention that forwards a K/V block only as far as some rank still sees it.
//
// The plain ring (ring.hpp) carries every owner's K/V block through all C - 1 hops whatever the mask. Here each
// owner o's block travels a(o) hops clockwise (to o+1, o+2, ...) and b(o) hops counter-clockwise (to o-1, ...),
// the fewest hops that reach every rank needing a row of it (kv_need.hpp): with the ranks that need o at clockwise
// distances d_1 < d_2 < ... (of 1..C-1), a split after d_k sends clockwise to d_k and the other way to d_{k+1}:
//   a = d_k,  b = C - d_{k+1},  minimising a + b (ties: the larger a, so that a mask that prunes nothing gives the
//   plain ring, a = C - 1, b = 0)
// A block no rank needs is never sent. Under a window no longer than a chunk a rank needs at most its two neighbours
// (zigzag: the chunks before its early chunk and after its late one), so the ring becomes a halo exchange: a = b = 1.
#pragma once
#include <vector>

#include "sim/strategies/strategy.hpp"

namespace cpsim {

struct RingRoute {
  std::vector<int> cw, ccw;  // per owner: hops clockwise (rank o -> o+1 -> ...) and counter-clockwise
  int steps = 0;             // the most hops any block makes either way: the ring's steps after the first
  int hops(int owner) const { return cw[static_cast<std::size_t>(owner)] + ccw[static_cast<std::size_t>(owner)]; }
  // The blocks that reach `rank` in the forward: owners o with the rank within a(o) hops clockwise or b(o) the other
  // way.
  std::int64_t blocks_received(int rank) const;
};
RingRoute ring_route(const SeqLayout& layout, const Mask& mask);

}  // namespace cpsim
