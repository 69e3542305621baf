// Per-rank work of causal attention under a layout, computed from the positions (never typed in).
//
//   chunk_blocks: the balance table of the handbook chapter "Context parallelism: Ring Attention and Ulysses".
//     The sequence is cut into 2C chunks; a query chunk c attends to c full chunk blocks plus half of the
//     diagonal one, so it costs c + 1/2 blocks (t x t blocks, a diagonal one counting 1/2).
//     C=4: contiguous [2, 6, 10, 14], zigzag [8, 8, 8, 8].
//   visible_pairs: exact causal (query, key) pairs of the rank's queries over the whole sequence, per head.
//   ring_blocks: blocks a ring computes per rank (a step whose K/V the rank's queries cannot see is skipped).
//     C=4: contiguous [1, 2, 3, 4], zigzag [4, 4, 4, 4].
//   ring_step_pairs: [rank][step] visible pairs per head at each ring step (zigzag: 2t^2 + t at step 0, then 2t^2).
#pragma once
#include <cstdint>
#include <vector>

#include "sim/layout/layout.hpp"

namespace cpsim {

// Throws UsageError when S is not divisible by 2C (the chunk grid does not exist).
std::vector<double> chunk_blocks(const SeqLayout& L);
std::vector<std::int64_t> visible_pairs_per_rank(const SeqLayout& L);
std::vector<int> ring_blocks(const SeqLayout& L);
std::vector<std::vector<std::int64_t>> ring_step_pairs(const SeqLayout& L);

// Imbalance of a per-rank table: max / mean (1 is perfectly balanced).
double imbalance(const std::vector<double>& per_rank);

}  // namespace cpsim
