#include "sim/core/mask.hpp"

#include <algorithm>

#include "sim/core/error.hpp"

namespace cpsim {

Mask::Mask(bool causal) : causal_(causal) {}

Mask::Mask(bool causal, std::int64_t window, std::vector<std::int64_t> bounds) : causal_(causal), window_(window) {
  if (window < 0) throw Error("mask: the window must be 0 (none) or positive (got " + std::to_string(window) + ")");
  if (bounds.size() <= 2) {  // one document: the same mask as none
    if (bounds.size() == 1 || (bounds.size() == 2 && (bounds[0] != 0 || bounds[1] <= 0)))
      throw Error("mask: document bounds must run from 0 to S");
    return;
  }
  if (bounds.front() != 0) throw Error("mask: the first document must start at position 0");
  for (std::size_t i = 1; i < bounds.size(); ++i)
    if (bounds[i] <= bounds[i - 1]) throw Error("mask: document bounds must be strictly ascending");
  bounds_ = std::make_shared<const std::vector<std::int64_t>>(std::move(bounds));
}

const std::vector<std::int64_t>& Mask::bounds() const {
  static const std::vector<std::int64_t> none;
  return bounds_ ? *bounds_ : none;
}

std::int64_t Mask::document_of(std::int64_t p) const {
  if (!bounds_) return 0;
  const auto& b = *bounds_;
  const auto d = std::upper_bound(b.begin(), b.end(), p) - b.begin() - 1;
  return std::clamp<std::int64_t>(d, 0, static_cast<std::int64_t>(b.size()) - 2);
}

// With q >= 0 and W <= 2^63 - 1, q - (W - 1) >= -(2^63 - 2) never wraps; q + (W - 1) may, so it saturates.
std::int64_t Mask::lo(std::int64_t q) const {
  std::int64_t l = -kUnlimited;
  if (bounds_) l = (*bounds_)[static_cast<std::size_t>(document_of(q))];
  if (window_ > 0) l = std::max(l, q - (window_ - 1));
  return l;
}

std::int64_t Mask::hi(std::int64_t q) const {
  std::int64_t h = kUnlimited;
  if (bounds_) h = (*bounds_)[static_cast<std::size_t>(document_of(q)) + 1] - 1;
  if (causal_)
    h = std::min(h, q);
  else if (window_ > 0 && window_ - 1 <= kUnlimited - q)
    h = std::min(h, q + (window_ - 1));
  return h;
}

std::string Mask::describe() const {
  std::string s = causal_ ? "causal" : "full";
  if (bounds_) s += ", " + std::to_string(documents()) + " documents";
  if (window_ > 0) s += ", window " + std::to_string(window_);
  return s;
}

bool Mask::operator==(const Mask& o) const {
  return causal_ == o.causal_ && window_ == o.window_ && bounds() == o.bounds();
}

PairCount floor_sum_wide(std::int64_t n_in, std::int64_t m_in, std::int64_t a_in, std::int64_t b_in) {
  using U = unsigned __int128;
  U n = static_cast<U>(n_in), m = static_cast<U>(m_in), a = static_cast<U>(a_in), b = static_cast<U>(b_in), ans = 0;
  while (n > 0) {
    if (a >= m) {
      ans += n * (n - 1) / 2 * (a / m);
      a %= m;
    }
    if (b >= m) {
      ans += n * (b / m);
      b %= m;
    }
    const U y_max = a * n + b;
    if (y_max < m) break;
    n = y_max / m;
    b = y_max % m;
    std::swap(m, a);
  }
  return static_cast<PairCount>(ans);
}

std::int64_t floor_sum(std::int64_t n, std::int64_t m, std::int64_t a, std::int64_t b) {
  const PairCount s = floor_sum_wide(n, m, a, b);
  if (s > std::numeric_limits<std::int64_t>::max()) throw Error("floor_sum: the sum does not fit in 64 bits");
  return static_cast<std::int64_t>(s);
}

std::string count_text(PairCount n) {
  if (n == 0) return "0";
  const bool negative = n < 0;
  auto u = negative ? -static_cast<unsigned __int128>(n) : static_cast<unsigned __int128>(n);
  std::string s;
  for (; u > 0; u /= 10) s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(u % 10)));
  return negative ? "-" + s : s;
}

namespace {

// An arithmetic progression of positions: first + i step, i < n (step 1 when n = 1).
struct Ap {
  std::int64_t first = 0, n = 0, step = 1;
  std::int64_t last() const { return first + (n - 1) * step; }
};

// ceil(x / y) for y >= 1, in 128 bits so that x + y - 1 never wraps.
PairCount ceil_div(PairCount x, PairCount y) {
  return x >= 0 ? (x + y - 1) / y : -((-x) / y);
}

// clamp(v, lo, hi) back into 64 bits.
std::int64_t clamp64(PairCount v, std::int64_t lo, std::int64_t hi) {
  return static_cast<std::int64_t>(std::clamp<PairCount>(v, lo, hi));
}

// A run of blocks is `width` interleaved progressions: as a set of positions that is all the counting needs.
void append_aps(const Positions& p, std::vector<Ap>& out) {
  for (const PosRun& r : p.runs()) {
    if (r.width == 1) {
      out.push_back(Ap{r.first, r.count, r.count > 1 ? r.stride : 1});
      continue;
    }
    for (std::int64_t j = 0; j < r.width; ++j) out.push_back(Ap{r.first + j, r.count / r.width, r.stride});
  }
}

// F(d) = #{(i, j) : k_j <= q_i + d}. For query i the count is clamp(floor(x_i / ks) + 1, 0, nk) with
// x_i = q_0 + d - k_0 + i qs: 0 before i_lo (x_i < 0), nk from i_hi on (x_i >= (nk - 1) ks), a floor sum between.
// d is first clamped to [k_0 - q_last - 1, k_last - q_0] (below: no pair, above: every pair), so that no sum of
// positions and d wraps whatever the window: x_0 then lies in [-(q_last - q_0) - 1, k_last - k_0].
PairCount count_le(const Ap& q, const Ap& k, std::int64_t d) {
  d = std::clamp(d, k.first - q.last() - 1, k.last() - q.first);
  const std::int64_t qs = q.step, ks = k.step, x0 = q.first + d - k.first, top = (k.n - 1) * ks;
  // top - x0 may pass 2^63 when both progressions span most of the positions: ceil_div works in 128 bits.
  const std::int64_t i_lo = clamp64(x0 >= 0 ? 0 : ceil_div(-PairCount{x0}, qs), 0, q.n);
  const std::int64_t i_hi = clamp64(x0 >= top ? 0 : ceil_div(PairCount{top} - x0, qs), i_lo, q.n);
  const std::int64_t n = i_hi - i_lo;
  return PairCount{k.n} * (q.n - i_hi) + n + (n > 0 ? floor_sum_wide(n, ks, qs, x0 + i_lo * qs) : 0);
}

// Pairs of q and k inside one document (or without documents): lo(q) = q - W + 1 with a window, hi(q) = q (causal),
// q + W - 1 (full with a window) or unlimited.
PairCount count_in_document(const Ap& q, const Ap& k, const Mask& m) {
  const std::int64_t W = m.window();
  const PairCount below_hi = m.causal() ? count_le(q, k, 0) : W > 0 ? count_le(q, k, W - 1) : PairCount{q.n} * k.n;
  return below_hi - (W > 0 ? count_le(q, k, -W) : 0);
}

// The part of a progression inside [lo, hi); false when none.
bool clip(const Ap& a, std::int64_t lo, std::int64_t hi, Ap& out) {
  const std::int64_t i0 = clamp64(a.first >= lo ? 0 : ceil_div(PairCount{lo} - a.first, a.step), 0, a.n);
  const std::int64_t i1 = clamp64(a.first >= hi ? 0 : ceil_div(PairCount{hi} - a.first, a.step), 0, a.n);
  if (i0 >= i1) return false;
  out = Ap{a.first + i0 * a.step, i1 - i0, i1 - i0 > 1 ? a.step : 1};
  return true;
}

struct Piece {
  std::int64_t doc;
  Ap ap;
};

// Every progression cut at the document bounds it crosses, sorted by document.
std::vector<Piece> pieces(const std::vector<Ap>& aps, const Mask& m) {
  const auto& b = m.bounds();
  std::vector<Piece> out;
  for (const Ap& a : aps)
    for (std::int64_t d = m.document_of(a.first), last = m.document_of(a.last()); d <= last; ++d) {
      Ap part;
      if (clip(a, b[static_cast<std::size_t>(d)], b[static_cast<std::size_t>(d) + 1], part)) out.push_back({d, part});
    }
  std::stable_sort(out.begin(), out.end(), [](const Piece& x, const Piece& y) { return x.doc < y.doc; });
  return out;
}

}  // namespace

PairCount visible_pairs_wide(const Positions& q, const Positions& k, const Mask& mask) {
  if (q.empty() || k.empty()) return 0;
  std::vector<Ap> qa, ka;
  append_aps(q, qa);
  append_aps(k, ka);
  PairCount total = 0;
  if (!mask.has_documents()) {
    for (const Ap& x : qa)
      for (const Ap& y : ka) total += count_in_document(x, y, mask);
    return total;
  }
  const std::vector<Piece> qp = pieces(qa, mask), kp = pieces(ka, mask);
  std::size_t j = 0;
  for (std::size_t i = 0; i < qp.size();) {
    const std::int64_t d = qp[i].doc;
    std::size_t i_end = i;
    while (i_end < qp.size() && qp[i_end].doc == d) ++i_end;
    while (j < kp.size() && kp[j].doc < d) ++j;
    for (std::size_t jj = j; jj < kp.size() && kp[jj].doc == d; ++jj)
      for (std::size_t ii = i; ii < i_end; ++ii) total += count_in_document(qp[ii].ap, kp[jj].ap, mask);
    i = i_end;
  }
  return total;
}

std::int64_t visible_pairs(const Positions& q, const Positions& k, const Mask& mask) {
  const PairCount n = visible_pairs_wide(q, k, mask);
  if (n > std::numeric_limits<std::int64_t>::max())
    throw Error("visible pairs: " + count_text(n) + " pairs (" + q.text() + " x " + k.text() +
                ") do not fit in 64 bits");
  return static_cast<std::int64_t>(n);
}

bool pair_count_fits(std::int64_t S, const Mask& mask, PairCount* pairs) {
  const Positions all = Positions::range(0, S);
  const PairCount n = S > 0 ? visible_pairs_wide(all, all, mask) : 0;
  if (pairs) *pairs = n;
  return n <= std::numeric_limits<std::int64_t>::max();
}

}  // namespace cpsim
