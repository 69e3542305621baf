// The balanced sharding: chunks of T tokens assigned to ranks so that the busiest rank sees as few visible pairs as
// a simple rule can make it.
//
// What it optimises: the largest per-rank total of visible (query, key) pairs over the whole sequence under the
// mask, which is each rank's attention work in the ring (summed over its steps) and in the all-gather. It does not
// balance each ring step on its own, nor the K/V a rank receives (every sharding moves the same bytes).
// The rule: the greedy longest-processing-time assignment (Graham, 1969) with equal counts. Chunks are taken from
// the most to the least costly (ties: the earlier chunk first) and each goes to the least loaded rank that still
// has room for one of its S/(C T) chunks (ties: the lower rank). The cost of chunk c is the visible pairs of its T
// queries against every key: computed by formula (mask.hpp), so the rule runs in O(n log n) for n = S/T chunks.
#pragma once
#include <cstdint>
#include <vector>

#include "sim/core/mask.hpp"

namespace cpsim {

// The most chunks a balanced layout deals (S/T): its pair counts take about (S/T)^2 steps (layout.cpp refuses more).
inline constexpr std::int64_t kMaxBalancedChunks = 8192;

// The chunk size when none is asked for: S/(4C) when S is divisible by 4C, else S/(2C), else S/C.
std::int64_t default_balance_chunk(int ranks, std::int64_t seq);

// Per rank, the chunk indices it owns, ascending. S % T == 0 and (S/T) % C == 0 (checked by the layout).
std::vector<std::vector<std::int64_t>> balance_chunks(int ranks, std::int64_t seq, std::int64_t chunk,
                                                      const Mask& mask);

}  // namespace cpsim
