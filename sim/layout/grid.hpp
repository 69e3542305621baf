// A causal grid drawn in the terminal, at chunk granularity: rows are query chunks, columns key chunks.
// Each cell shows a rank ("3" for a wholly visible block, "3\" for a block on the diagonal, partly masked), "."
// for a masked block and " " for a visible block nobody computes at the step shown. grid_legend says so in words,
// under the grid.
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

// The legend printed under a grid, two lines starting with `indent`. `role` says what a cell's rank does with the
// block ("computes the block", "owns the query chunk"); `blanks`: the grid can hold visible cells nobody computes.
//   legend: r = rank r computes the block    r\ = on the diagonal, partly masked
//           . = masked (keys after queries)  blank = visible, not computed now
std::string grid_legend(const std::string& role, bool blanks, const std::string& indent = "  ");
}  // namespace cpsim
