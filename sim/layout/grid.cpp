#include "sim/layout/grid.hpp"

#include <sstream>

namespace cpsim {

Grid owner_grid(const SeqLayout& L) {
  const int n = 2 * L.ranks();
  const std::int64_t t = L.seq() / n;
  Grid g(n, std::vector<GridCell>(n));
  for (int qc = 0; qc < n; ++qc)
    for (int kc = 0; kc <= qc; ++kc) g[qc][kc] = GridCell{L.owner(qc * t), kc == qc};
  return g;
}

std::string draw_grid(const Grid& grid) {
  std::ostringstream os;
  const int n = static_cast<int>(grid.size());
  const int w = n > 10 ? 4 : 3;  // cell width
  auto pad = [&](std::string s) {
    s.resize(static_cast<std::size_t>(w), ' ');
    return s;
  };
  os << "      ";
  for (int k = 0; k < n; ++k) os << pad("k" + std::to_string(k));
  os << "\n";
  for (int q = 0; q < n; ++q) {
    std::string label = "q" + std::to_string(q);
    label.resize(6, ' ');
    os << label;
    for (int k = 0; k < n; ++k) {
      const GridCell& c = grid[q][k];
      if (k > q)
        os << pad(".");
      else if (c.rank < 0)
        os << pad("");
      else
        os << pad(std::to_string(c.rank) + (c.diagonal ? "\\" : ""));
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

std::string grid_legend(const std::string& role, bool blanks, const std::string& indent) {
  auto pad = [](std::string s, std::size_t w) {
    if (s.size() < w) s.append(w - s.size(), ' ');
    return s;
  };
  std::string first = indent + "legend: " + pad("r = rank r " + role, 33) + "r\\ = on the diagonal, partly masked";
  std::string second = indent + "        . = masked (keys after queries)";
  if (blanks)
    second = indent + "        " + pad(". = masked (keys after queries)", 33) + "blank = visible, not computed now";
  return first + "\n" + second + "\n";
}

}  // namespace cpsim
