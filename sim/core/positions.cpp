#include "sim/core/positions.hpp"

#include <numeric>

#include "sim/core/error.hpp"

namespace cpsim {

Positions iota_positions(std::int64_t first, std::int64_t count) {
  Positions p(static_cast<std::size_t>(count));
  std::iota(p.begin(), p.end(), first);
  return p;
}

Positions slice(const Positions& p, std::int64_t first, std::int64_t count) {
  if (first < 0 || count < 0 || first + count > static_cast<std::int64_t>(p.size()))
    throw Error("positions slice out of range");
  return Positions(p.begin() + first, p.begin() + first + count);
}

Positions concat(const Positions& a, const Positions& b) {
  Positions r = a;
  r.insert(r.end(), b.begin(), b.end());
  return r;
}

std::vector<Span> to_spans(const Positions& p) {
  std::vector<Span> out;
  for (std::int64_t x : p) {
    if (!out.empty() && out.back().hi == x)
      ++out.back().hi;
    else
      out.push_back(Span{x, x + 1});
  }
  return out;
}

std::int64_t visible_pairs(const Positions& q, const Positions& k, bool causal) {
  if (!causal) return static_cast<std::int64_t>(q.size()) * static_cast<std::int64_t>(k.size());
  // For each query (ascending), count keys <= query with a pointer that only moves forward.
  std::int64_t total = 0;
  std::size_t j = 0;
  for (std::int64_t qp : q) {
    while (j < k.size() && k[j] <= qp) ++j;
    total += static_cast<std::int64_t>(j);
  }
  return total;
}

}  // namespace cpsim
