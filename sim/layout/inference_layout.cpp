#include "sim/layout/inference_layout.hpp"

#include <algorithm>

namespace cpsim {

namespace {
// Chunk i of n tokens cut into k chunks: [start(i), start(i + 1)), start(i) = i floor(n/k) + min(i, n mod k).
std::int64_t chunk_start(std::int64_t n, std::int64_t k, std::int64_t i) {
  return i * (n / k) + std::min(i, n % k);
}
}  // namespace

Positions zigzag_share(std::int64_t first, std::int64_t n, int ranks, int rank) {
  const std::int64_t k = 2 * static_cast<std::int64_t>(ranks);
  Positions p;
  for (const std::int64_t c : {static_cast<std::int64_t>(rank), k - 1 - rank}) {
    const std::int64_t lo = chunk_start(n, k, c), hi = chunk_start(n, k, c + 1);
    if (hi > lo) p.append(PosRun{first + lo, hi - lo, 1, 1});
  }
  return p;
}

InferenceLayout::InferenceLayout(int ranks, std::int64_t new_tokens, std::int64_t cached, NewTokenPlacement placement)
    : ranks_(ranks), new_(new_tokens), cached_(cached), placement_(placement) {}

Positions InferenceLayout::new_positions(int rank) const {
  if (placement_ == NewTokenPlacement::zigzag) return zigzag_share(cached_, new_, ranks_, rank);
  // Round-robin: tokens rank, rank + C, ... of the new ones.
  Positions p;
  if (rank < new_) p.append(PosRun{cached_ + rank, (new_ - rank + ranks_ - 1) / ranks_, ranks_, 1});
  return p;
}

Positions InferenceLayout::cache_positions(int rank) const { return zigzag_share(0, cached_, ranks_, rank); }

Positions InferenceLayout::kv_positions(int rank) const {
  Positions p = cache_positions(rank);
  p.append(new_positions(rank));
  return p;
}

std::int64_t InferenceLayout::max_new() const {
  std::int64_t m = 0;
  for (int r = 0; r < ranks_; ++r) m = std::max(m, new_count(r));
  return m;
}

std::int64_t InferenceLayout::max_kv() const {
  std::int64_t m = 0;
  for (int r = 0; r < ranks_; ++r) m = std::max(m, kv_count(r));
  return m;
}

}  // namespace cpsim
