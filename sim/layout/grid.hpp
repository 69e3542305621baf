// A causal grid drawn in the terminal, at chunk granularity: rows are query chunks, columns key chunks.
// Each cell shows the rank that computes it ("3" for a full block, "3\" for a diagonal, partly masked block),
// "." for a masked block and " " for a visible block nobody computes at the step shown.
//
//          k0 k1 k2 k3
//     q0   0\ .  .  .
//     q1   1  1\ .  .
#pragma once
#include <string>
#include <vector>

#include "sim/layout/layout.hpp"

namespace cpsim {

struct GridCell {
  int rank = -1;          // -1: not computed (shown blank when visible, "." when masked)
  bool diagonal = false;  // partly masked block on the diagonal
};
using Grid = std::vector<std::vector<GridCell>>;  // [query chunk][key chunk]

// The whole causal grid of a layout on its 2C chunks: each visible block computed by its query owner.
Grid owner_grid(const SeqLayout& L);
std::string draw_grid(const Grid& grid);

}  // namespace cpsim
