#include "sim/layout/kv_need.hpp"

#include <algorithm>

namespace cpsim {

std::vector<Span> visible_key_spans(const SeqLayout& layout, int rank, const Mask& mask) {
  std::vector<Span> out;
  const auto add = [&](std::int64_t lo, std::int64_t hi) {  // [lo, hi], ascending lo
    if (!out.empty() && lo <= out.back().hi) {
      out.back().hi = std::max(out.back().hi, hi + 1);
      return;
    }
    out.push_back({lo, hi + 1});
  };
  // 1. One interval per run of consecutive queries; one per query in a strided run, unless the queries' intervals
  //    are known to overlap: without documents, when the stride is at most the window (or there is none), each
  //    query's [lo, hi] reaches the next one's lo, so the run's union is [lo(first), hi(last)] (lo and hi never
  //    decrease).
  const bool no_gaps = !mask.has_documents();
  for_each_progression(layout.positions(rank), [&](std::int64_t, std::int64_t first, std::int64_t count,
                                                   std::int64_t step) {
    if (step == 1 || (no_gaps && (mask.window() == 0 || step <= mask.window())))
      return add(mask.lo(first), mask.hi(first + (count - 1) * step));
    for (std::int64_t i = 0; i < count; ++i) add(mask.lo(first + i * step), mask.hi(first + i * step));
  });
  // 2. Clamp to the sequence (hi may be "unlimited").
  for (Span& s : out) s.hi = std::min(s.hi, layout.seq());
  return out;
}

NeededRows needed_rows(const SeqLayout& layout, const std::vector<Span>& seen, int owner) {
  NeededRows n;
  const Positions k = layout.positions(owner);
  for (const Span& s : seen) {
    const std::int64_t a = k.lower_bound(s.lo), b = k.lower_bound(s.hi);
    if (b <= a) continue;
    if (!n.rows.empty() && n.rows.back().hi == a)
      n.rows.back().hi = b;
    else
      n.rows.push_back({a, b});
  }
  for (const Span& r : n.rows) {
    n.positions.append(slice(k, r.lo, r.hi - r.lo));
    n.count += r.hi - r.lo;
  }
  return n;
}

NeededRows needed_rows(const SeqLayout& layout, int rank, int owner, const Mask& mask) {
  return needed_rows(layout, visible_key_spans(layout, rank, mask), owner);
}

std::vector<std::int64_t> needed_counts(const SeqLayout& layout, int rank, const Mask& mask) {
  const std::vector<Span> seen = visible_key_spans(layout, rank, mask);
  std::vector<std::int64_t> out(static_cast<std::size_t>(layout.ranks()), 0);
  for (int o = 0; o < layout.ranks(); ++o)
    if (o != rank) out[static_cast<std::size_t>(o)] = needed_rows(layout, seen, o).count;
  return out;
}

std::int64_t needed_total(const SeqLayout& layout, int rank, const Mask& mask) {
  std::int64_t t = 0;
  for (std::int64_t c : needed_counts(layout, rank, mask)) t += c;
  return t;
}

}  // namespace cpsim
