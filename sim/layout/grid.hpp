// The attention grid drawn in the terminal: rows are query cells, columns key cells (the 2C chunks of a causal
// grid). Each cell shows the rank that computes it ("3" for a block the mask shows whole, "3\" for one it covers in
// part, as on the causal diagonal), "*" for a block several ranks compute (each for its own heads: Ulysses, the
// hybrid's all-to-all groups), "." for a masked block and " " for a visible block nobody computes at the step
// shown. grid_legend says so in words, under the grid.
//
//          k0 k1 k2 k3
//     q0   0\ .  .  .
//     q1   1  1\ .  .
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/mask.hpp"
#include "sim/layout/layout.hpp"

namespace cpsim {

struct GridCell {
  int rank = -1;          // -1: not computed (shown blank when visible, "." when masked)
  bool diagonal = false;  // partly masked (on the causal diagonal, at a document bound, at a window's edge)
  bool masked = false;    // no pair of the block is visible
  int ranks = 0;          // how many ranks compute it (more than one: shown "*", each computes its own heads)
};
using Grid = std::vector<std::vector<GridCell>>;  // [query cell][key cell]

// The whole causal grid of a layout on its 2C chunks: each visible block computed by its query owner.
Grid owner_grid(const SeqLayout& L);

// The grid of a layout under a mask, `cell` tokens a cell (cell divides S): each cell computed by the owner of its
// query cell, masked, partial or whole as the visible pairs of the block say (counted by formula).
Grid mask_grid(const SeqLayout& L, const Mask& mask, std::int64_t cell);
// The largest cell on which every rank's runs and every document bound fall: the gcd of their boundaries.
std::int64_t grid_cell(const SeqLayout& L, const Mask& mask);

std::string draw_grid(const Grid& grid);

// The legend printed under a grid, two lines starting with `indent`. `role` says what a cell's rank does with the
// block ("computes the block", "owns the query chunk"); `blanks`: the grid can hold visible cells nobody computes.
//   legend: r = rank r computes the block    r\ = on the diagonal, partly masked
//           . = masked (keys after queries)  blank = visible, not computed now
// `under_mask`: a mask_grid's legend (its partly masked cells lie at document bounds and window edges too).
std::string grid_legend(const std::string& role, bool blanks, const std::string& indent = "  ",
                        bool under_mask = false);
}  // namespace cpsim
