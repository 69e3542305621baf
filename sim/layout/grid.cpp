#include "sim/layout/grid.hpp"

#include <numeric>
#include <sstream>

#include "sim/core/columns.hpp"

namespace cpsim {

Grid owner_grid(const SeqLayout& L) {
  const int n = 2 * L.ranks();
  const std::int64_t t = L.seq() / n;
  Grid g(n, std::vector<GridCell>(n));
  for (int qc = 0; qc < n; ++qc)
    for (int kc = 0; kc < n; ++kc)
      g[qc][kc] = kc <= qc ? GridCell{L.owner(qc * t), kc == qc, false} : GridCell{-1, false, true};
  return g;
}

Grid mask_grid(const SeqLayout& L, const Mask& mask, std::int64_t cell) {
  const auto n = static_cast<std::size_t>(L.seq() / cell);
  Grid g(n, std::vector<GridCell>(n));
  for (std::size_t qc = 0; qc < n; ++qc) {
    const auto q = Positions::range(static_cast<std::int64_t>(qc) * cell, cell);
    for (std::size_t kc = 0; kc < n; ++kc) {
      const std::int64_t pairs = visible_pairs(q, Positions::range(static_cast<std::int64_t>(kc) * cell, cell), mask);
      g[qc][kc] = pairs == 0 ? GridCell{-1, false, true} : GridCell{L.owner(q.front()), pairs < cell * cell, false};
    }
  }
  return g;
}

std::int64_t grid_cell(const SeqLayout& L, const Mask& mask) {
  std::int64_t g = L.seq();
  for (int r = 0; r < L.ranks(); ++r) {
    const Positions pos = L.positions(r);
    for (const PosRun& run : pos.runs()) {
      g = std::gcd(g, run.first);
      if (run.stride == 1) {  // [first, first + count)
        g = std::gcd(g, run.count);
      } else {  // blocks [first + b stride, + width)
        g = std::gcd(g, run.width);
        g = std::gcd(g, run.stride);
      }
    }
  }
  for (std::int64_t b : mask.bounds()) g = std::gcd(g, b);
  return g;
}

std::string draw_grid(const Grid& grid) {
  std::ostringstream os;
  const int n = static_cast<int>(grid.size());
  const int w = n > 10 ? 4 : 3;  // cell width
  auto pad = [&](const std::string& s) { return left(s, static_cast<std::size_t>(w)); };
  os << "      ";
  for (int k = 0; k < n; ++k) os << pad("k" + std::to_string(k));
  os << "\n";
  for (int q = 0; q < n; ++q) {
    os << left("q" + std::to_string(q), 6);
    for (int k = 0; k < n; ++k) {
      const GridCell& c = grid[q][k];
      if (c.masked)
        os << pad(".");
      else if (c.rank < 0)
        os << pad("");
      else
        os << pad((c.ranks > 1 ? std::string("*") : std::to_string(c.rank)) + (c.diagonal ? "\\" : ""));
    }
    os << "\n";
  }
  // Trailing spaces make transcripts fragile: strip them line by line.
  std::string s = os.str(), out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string grid_legend(const std::string& role, bool blanks, const std::string& indent, bool under_mask) {
  const std::string partly = under_mask ? "r\\ = the mask covers it in part" : "r\\ = on the diagonal, partly masked";
  const std::string masked = under_mask ? ". = masked (no pair visible)" : ". = masked (keys after queries)";
  std::string first = indent + "legend: " + left("r = rank r " + role, 33) + partly;
  std::string second = indent + "        " + masked;
  if (blanks) second = indent + "        " + left(masked, 33) + "blank = visible, not computed now";
  return first + "\n" + second + "\n";
}

}  // namespace cpsim
