#include "sim/kernels/tiled.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "sim/core/error.hpp"
#include "sim/kernels/eigen.hpp"
#include "sim/kernels/view_checks.hpp"

namespace cpsim {
namespace {

template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using Strided = Eigen::Map<RowMat<T>, Eigen::Unaligned, Eigen::OuterStride<>>;  // a head's rows inside a buffer
template <class T>
using Dense = Eigen::Map<RowMat<T>>;  // a tile of scratch memory, rows packed

// Rows [s, s + n) of head h of batch b of an activation view: [n, D], rows N*D apart.
template <class T>
Strided<T> head_rows(const View& x, std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t n) {
  const std::int64_t D = x.d();
  T* p = x.buf.as<T>() + x.buf.offset(x.b0 + b, x.s0 + s, x.h0 + h);
  return Strided<T>(p, n, D, Eigen::OuterStride<>(x.buf.dims().n * D));
}

// The LSE row of head h of batch b of a [B, N, S] view: sq values, contiguous.
template <class T>
T* lse_row(const View& lse, std::int64_t b, std::int64_t h) {
  return lse.buf.as<T>() + lse.buf.offset(lse.b0 + b, lse.s0, lse.h0 + h);
}

enum class TileMask { masked, visible, partial };

// Per query row i, the key rows it sees: [lo[i], hi[i]) of the block's ascending keys. Both never decrease with i
// (mask.hpp), so two pointers find them all in O(sq + sk).
struct KeyRanges {
  std::vector<std::int64_t> lo, hi;

  KeyRanges(const std::vector<std::int64_t>& qp, const std::vector<std::int64_t>& kp, const Mask& mask) {
    lo.resize(qp.size());
    hi.resize(qp.size());
    std::size_t a = 0, b = 0;
    for (std::size_t i = 0; i < qp.size(); ++i) {
      const std::int64_t first = mask.lo(qp[i]), last = mask.hi(qp[i]);
      while (a < kp.size() && kp[a] < first) ++a;
      while (b < kp.size() && kp[b] <= last) ++b;
      lo[i] = static_cast<std::int64_t>(a);
      hi[i] = static_cast<std::int64_t>(std::max(a, b));
    }
  }

  // Row i's visible keys among key rows [j0, j1), as a range of the tile's columns [c0, c1).
  std::pair<std::int64_t, std::int64_t> columns(std::int64_t i, std::int64_t j0, std::int64_t j1) const {
    const std::int64_t c0 = std::clamp(lo[static_cast<std::size_t>(i)], j0, j1) - j0;
    const std::int64_t c1 = std::clamp(hi[static_cast<std::size_t>(i)], j0, j1) - j0;
    return {c0, std::max(c0, c1)};
  }

  // Query rows [i0, i1) x key rows [j0, j1). The extreme rows decide most tiles (lo and hi are monotone); a tile the
  // extremes leave open is masked only when no row's range meets it.
  TileMask classify(std::int64_t i0, std::int64_t i1, std::int64_t j0, std::int64_t j1) const {
    const auto u = [](std::int64_t i) { return static_cast<std::size_t>(i); };
    if (hi[u(i1 - 1)] <= j0 || lo[u(i0)] >= j1) return TileMask::masked;   // every range ends before / starts after
    if (lo[u(i1 - 1)] <= j0 && hi[u(i0)] >= j1) return TileMask::visible;  // every range covers the tile
    for (std::int64_t i = i0; i < i1; ++i) {
      const auto [c0, c1] = columns(i, j0, j1);
      if (c1 > c0) return TileMask::partial;
    }
    return TileMask::masked;
  }
};

}  // namespace

template <class T>
TileCounts tiled_forward(const View& q, const Positions& q_pos, const View& k, const View& v, const Positions& k_pos,
                         const View& out, const View& lse, const Mask& mask, double scale, int tile) {
  const KeyRanges ranges(q_pos.expand(), k_pos.expand(), mask);  // the rows this call holds, one position each
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  const std::int64_t sq = q.ns, sk = k.ns, D = q.d(), group = q.nh / k.nh, t = tile;
  const std::int64_t key_tiles = (sk + t - 1) / t;
  const T sc = static_cast<T>(scale);
  RowMat<T> s_buf(t, t), acc_buf(t, D);  // s, then p: [t, t]; acc: [t, D]
  std::vector<T> m(t), l(t);             // running max (unscaled) and running sum, per row
  TileCounts counts;

  for (std::int64_t b = 0; b < q.nb; ++b)
    for (std::int64_t h = 0; h < q.nh; ++h) {
      const std::int64_t g = h / group;  // the kv head of query head h
      T* lse_h = lse_row<T>(lse, b, h);
      for (std::int64_t i0 = 0; i0 < sq; i0 += t) {
        const std::int64_t bq = std::min(t, sq - i0);
        const auto q_t = head_rows<T>(q, b, h, i0, bq);  // q_t: [bq, D]
        Dense<T> acc(acc_buf.data(), bq, D);             // acc: [bq, D]
        acc.setZero();
        std::fill(m.begin(), m.end(), kNegInf);
        std::fill(l.begin(), l.end(), T(0));

        // Only key tiles between the first row's first visible key and the last row's last can hold visible pairs.
        const std::int64_t kt_first = ranges.lo[static_cast<std::size_t>(i0)] / t;
        const std::int64_t kt_end = std::min(key_tiles, (ranges.hi[static_cast<std::size_t>(i0 + bq - 1)] + t - 1) / t);
        counts.skipped += key_tiles - std::max<std::int64_t>(kt_end - kt_first, 0);
        for (std::int64_t kt = kt_first; kt < kt_end; ++kt) {
          const std::int64_t j0 = kt * t, bk = std::min(t, sk - j0);
          const TileMask tm = ranges.classify(i0, i0 + bq, j0, j0 + bk);
          if (tm == TileMask::masked) {
            ++counts.skipped;
            continue;
          }
          ++counts.computed;
          const auto k_t = head_rows<T>(k, b, g, j0, bk);  // k_t, v_t: [bk, D]
          const auto v_t = head_rows<T>(v, b, g, j0, bk);
          Dense<T> s(s_buf.data(), bq, bk);
          s.noalias() = q_t * k_t.transpose();  // 1. s = q k^T: [bq, bk] (unscaled)

          for (std::int64_t r = 0; r < bq; ++r) {
            auto row = s.row(r);
            const auto [c0, c1] = tm == TileMask::partial ? ranges.columns(i0 + r, j0, j0 + bk)
                                                          : std::pair<std::int64_t, std::int64_t>{0, bk};
            if (c1 == c0) {  // this row sees none of these keys
              row.setZero();
              continue;
            }
            auto seen = row.segment(c0, c1 - c0);
            // 2. m' = max(m, rowmax(s)); alpha = exp(scale (m - m')), 0 while m = -inf
            const T m_new = std::max(m[r], seen.maxCoeff());
            const T alpha = std::exp(sc * (m[r] - m_new));
            // 3. p = exp(scale (s - m')) on the visible keys, 0 on the masked ones
            seen = ((seen.array() - m_new) * sc).exp();
            row.head(c0).setZero();
            row.tail(bk - c1).setZero();
            // 4. l = alpha l + rowsum(p); acc = alpha acc
            l[r] = alpha * l[r] + seen.sum();
            if (alpha != T(1)) acc.row(r) *= alpha;
            m[r] = m_new;
          }
          acc.noalias() += s * v_t;  // 5. acc += p v: [bq, D]
        }

        // 6. out = acc / l, lse = scale m + log l; a row that saw no key: out 0, lse -inf
        auto o_t = head_rows<T>(out, b, h, i0, bq);
        for (std::int64_t r = 0; r < bq; ++r) {
          if (l[r] == T(0)) {
            o_t.row(r).setZero();
            lse_h[i0 + r] = kNegInf;
          } else {
            o_t.row(r) = acc.row(r) / l[r];
            lse_h[i0 + r] = static_cast<T>(scale * m[r] + std::log(static_cast<double>(l[r])));  // one rounding
          }
        }
      }
    }
  return counts;
}

template <class T>
TileCounts tiled_backward(const View& q, const Positions& q_pos, const View& k, const View& v, const Positions& k_pos,
                          const View& out, const View& lse, const View& dout, const View& dq, const View& dk,
                          const View& dv, const Mask& mask, double scale, int tile) {
  const KeyRanges ranges(q_pos.expand(), k_pos.expand(), mask);
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  const std::int64_t sq = q.ns, sk = k.ns, D = q.d(), group = q.nh / k.nh, t = tile;
  const T sc = static_cast<T>(scale);
  // dp - Di cancels where a row's probability sits on a few keys (p = 1, dp = Di, for a row that sees one key), so
  // dp, Di and ds are formed in double and only ds is rounded to T: in f32 the cancellation then costs nothing.
  RowMat<T> p_buf(t, t), ds_buf(t, t), dk_buf(t, D), dv_buf(t, D);  // p, ds: [t, t]; dk, dv accumulators: [t, D]
  RowMat<double> dp_buf(t, t), do_buf(t, D), v_buf(t, D);           // dp: [t, t]; dout, v tiles in double: [t, D]
  std::vector<double> di(static_cast<std::size_t>(group * sq));     // Di of the group's query heads: [group, sq]
  TileCounts counts;

  for (std::int64_t b = 0; b < q.nb; ++b)
    for (std::int64_t g = 0; g < k.nh; ++g) {
      // 1. Di = rowsum(dout * out) for every query row of the heads that read kv head g
      for (std::int64_t hh = 0; hh < group; ++hh) {
        const auto o_h = head_rows<T>(out, b, g * group + hh, 0, sq);
        const auto do_h = head_rows<T>(dout, b, g * group + hh, 0, sq);
        for (std::int64_t i = 0; i < sq; ++i)
          di[hh * sq + i] = o_h.row(i).template cast<double>().dot(do_h.row(i).template cast<double>());
      }

      for (std::int64_t j0 = 0; j0 < sk; j0 += t) {
        const std::int64_t bk = std::min(t, sk - j0);
        const auto k_t = head_rows<T>(k, b, g, j0, bk);  // k_t, v_t: [bk, D]
        const auto v_t = head_rows<T>(v, b, g, j0, bk);
        Dense<double> v_d(v_buf.data(), bk, D);
        v_d = v_t.template cast<double>();
        Dense<T> dk_acc(dk_buf.data(), bk, D), dv_acc(dv_buf.data(), bk, D);
        dk_acc.setZero();
        dv_acc.setZero();

        for (std::int64_t hh = 0; hh < group; ++hh) {
          const std::int64_t h = g * group + hh;
          const T* lse_h = lse_row<T>(lse, b, h);
          const double* di_h = di.data() + hh * sq;
          for (std::int64_t i0 = 0; i0 < sq; i0 += t) {
            const std::int64_t bq = std::min(t, sq - i0);
            const TileMask tm = ranges.classify(i0, i0 + bq, j0, j0 + bk);
            if (tm == TileMask::masked) {
              ++counts.skipped;
              continue;
            }
            ++counts.computed;
            const auto q_t = head_rows<T>(q, b, h, i0, bq);  // q_t, do_t, dq_t: [bq, D]
            const auto do_t = head_rows<T>(dout, b, h, i0, bq);
            auto dq_t = head_rows<T>(dq, b, h, i0, bq);
            Dense<T> p(p_buf.data(), bq, bk), ds(ds_buf.data(), bq, bk);
            Dense<double> dp(dp_buf.data(), bq, bk), do_d(do_buf.data(), bq, D);

            p.noalias() = q_t * k_t.transpose();  // 2. s = q k^T: [bq, bk]
            for (std::int64_t r = 0; r < bq; ++r) {
              auto row = p.row(r);
              const auto [c0, c1] = tm == TileMask::partial ? ranges.columns(i0 + r, j0, j0 + bk)
                                                            : std::pair<std::int64_t, std::int64_t>{0, bk};
              const T lse_r = lse_h[i0 + r];
              if (c1 == c0 || lse_r == kNegInf) {  // no visible key here, or none anywhere: no gradient
                row.setZero();
                continue;
              }
              auto seen = row.segment(c0, c1 - c0);
              seen = (seen.array() * sc - lse_r).exp();  // 3. p = exp(scale s - lse)
              row.head(c0).setZero();
              row.tail(bk - c1).setZero();
            }
            dv_acc.noalias() += p.transpose() * do_t;  // 4. dv += p^T dout: [bk, D]
            do_d = do_t.template cast<double>();
            dp.noalias() = do_d * v_d.transpose();  // 5. dp = dout v^T: [bq, bk]
            for (std::int64_t r = 0; r < bq; ++r)   // 6. ds = scale p (dp - Di)
              ds.row(r) = (p.row(r).template cast<double>().array() * (dp.row(r).array() - di_h[i0 + r]) * scale)
                              .template cast<T>();
            dq_t.noalias() += ds * k_t;                // 7. dq += scale ds k: [bq, D]
            dk_acc.noalias() += ds.transpose() * q_t;  // 8. dk += scale ds^T q: [bk, D]
          }
        }
        head_rows<T>(dk, b, g, j0, bk) += dk_acc;  // 9. add this key tile's dk, dv into the views
        head_rows<T>(dv, b, g, j0, bk) += dv_acc;
      }
    }
  return counts;
}

template TileCounts tiled_forward<float>(const View&, const Positions&, const View&, const View&, const Positions&,
                                         const View&, const View&, const Mask&, double, int);
template TileCounts tiled_forward<double>(const View&, const Positions&, const View&, const View&, const Positions&,
                                          const View&, const View&, const Mask&, double, int);
template TileCounts tiled_backward<float>(const View&, const Positions&, const View&, const View&, const Positions&,
                                          const View&, const View&, const View&, const View&, const View&, const View&,
                                          const Mask&, double, int);
template TileCounts tiled_backward<double>(const View&, const Positions&, const View&, const View&, const Positions&,
                                           const View&, const View&, const View&, const View&, const View&, const View&,
                                           const Mask&, double, int);

}  // namespace cpsim
