// Global token positions. A rank's rows are generally not contiguous (zigzag owns two chunks), so every
// kernel takes the global position of each row; causal visibility is key position <= query position.
#pragma once
#include <cstdint>
#include <vector>

#include "sim/core/recorder.hpp"

namespace cpsim {

using Positions = std::vector<std::int64_t>;

Positions iota_positions(std::int64_t first, std::int64_t count);  // [first, first+count)
Positions slice(const Positions& p, std::int64_t first, std::int64_t count);
Positions concat(const Positions& a, const Positions& b);
std::vector<Span> to_spans(const Positions& p);                     // runs of consecutive positions

// Visible (query, key) pairs of one head: causal counts key <= query, full counts all.
// Positions in each list must be ascending (every layout in cpsim produces ascending rows): O(sq + sk).
std::int64_t visible_pairs(const Positions& q, const Positions& k, bool causal);

}  // namespace cpsim
