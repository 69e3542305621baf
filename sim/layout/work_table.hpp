// Per-rank work of attention under a layout and a mask, computed from the positions (never typed in), by formula on
// their runs (mask.hpp): nothing here is O(S).
//
//   chunk_blocks: the balance table of the handbook chapter "Context parallelism: Ring Attention and Ulysses".
//     The sequence is cut into 2C chunks; a query chunk c attends to c full chunk blocks plus half of the
//     diagonal one, so it costs c + 1/2 blocks (t x t blocks, a diagonal one counting 1/2; causal mask).
//     C=4: contiguous [2, 6, 10, 14], zigzag [8, 8, 8, 8].
//   visible_pairs_per_rank: exact (query, key) pairs of the rank's queries over the whole sequence, per head.
//   ring_blocks: blocks a ring computes per rank (a step whose K/V the rank's queries cannot see is skipped).
//     C=4: contiguous [1, 2, 3, 4], zigzag [4, 4, 4, 4].
//   ring_step_pairs: [rank][step] visible pairs per head at each ring step (zigzag: 2t^2 + t at step 0, then 2t^2).
//   compare_shardings: each sharding's per-rank and per-step work side by side, with the imbalances.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/mask.hpp"
#include "sim/layout/layout.hpp"

namespace cpsim {

// Throws UsageError when S is not divisible by 2C (the chunk grid does not exist).
std::vector<double> chunk_blocks(const SeqLayout& L);
std::vector<std::int64_t> visible_pairs_per_rank(const SeqLayout& L, const Mask& mask = {});
std::vector<int> ring_blocks(const SeqLayout& L, const Mask& mask = {});
std::vector<std::vector<std::int64_t>> ring_step_pairs(const SeqLayout& L, const Mask& mask = {});

// Imbalance of a per-rank table: max / mean (1 is perfectly balanced).
double imbalance(const std::vector<double>& per_rank);
double imbalance(const std::vector<std::int64_t>& per_rank);
// The ring's imbalance: every step lasts as long as its busiest rank, so the ring takes sum_i max_r pairs[r][i]
// where a perfect split would take sum / C.
double ring_imbalance(const std::vector<std::vector<std::int64_t>>& step_pairs);
// Per step i: max_r pairs[r][i] / mean_r pairs[r][i]; 0 where no rank works at that step (a skipped step, which
// tables show as "skip", not as a balanced 1.00).
std::vector<double> step_imbalances(const std::vector<std::vector<std::int64_t>>& step_pairs);
// "1.23", or "skip" for a step where no rank works (step_imbalances' 0).
std::string step_imbalance_text(double x);

// One sharding's work under a mask: per rank, per ring step, and the imbalances; or why it does not exist here.
struct ShardingWork {
  Sharding sharding = Sharding::zigzag;
  std::string name;     // SeqLayout::describe()
  std::string why_not;  // non-empty: the layout is impossible here (the constraint it breaks)
  std::vector<std::int64_t> per_rank;
  std::vector<std::vector<std::int64_t>> steps;  // [rank][step]
  double imbalance = 1, ring_imbalance = 1;
};
// The shardings a learner compares: contiguous, zigzag over the whole sequence, zigzag per document (with
// documents), striped and balanced, each under the same mask.
std::vector<ShardingWork> compare_shardings(int ranks, std::int64_t seq, const LayoutOptions& options);

}  // namespace cpsim
