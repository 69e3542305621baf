#include "sim/kernels/tiled.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
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

// Classifies query rows [i0, i1) x key rows [j0, j1) by the extreme positions they cover (both ascending).
TileMask classify(const Positions& qp, std::int64_t i0, std::int64_t i1, const Positions& kp, std::int64_t j0,
                  std::int64_t j1, bool causal) {
  if (!causal) return TileMask::visible;
  if (kp[j0] > qp[i1 - 1]) return TileMask::masked;    // the first key is after the last query
  if (kp[j1 - 1] <= qp[i0]) return TileMask::visible;  // the last key is at or before the first query
  return TileMask::partial;
}

// How many keys of [j0, j1) a query at position p sees: a prefix, since keys are ascending.
std::int64_t visible_prefix(const Positions& kp, std::int64_t j0, std::int64_t j1, std::int64_t p) {
  return std::upper_bound(kp.begin() + j0, kp.begin() + j1, p) - (kp.begin() + j0);
}

}  // namespace

template <class T>
TileCounts tiled_forward(const View& q, const Positions& q_pos, const View& k, const View& v, const Positions& k_pos,
                         const View& out, const View& lse, bool causal, double scale, int tile) {
  check_ascending(q_pos, "query positions");
  check_ascending(k_pos, "key positions");
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

        for (std::int64_t j0 = 0, kt = 0; j0 < sk; j0 += t, ++kt) {
          const std::int64_t bk = std::min(t, sk - j0);
          const TileMask mask = classify(q_pos, i0, i0 + bq, k_pos, j0, j0 + bk, causal);
          if (mask == TileMask::masked) {  // so is every later key tile: keys only move right
            counts.skipped += key_tiles - kt;
            break;
          }
          ++counts.computed;
          const auto k_t = head_rows<T>(k, b, g, j0, bk);  // k_t, v_t: [bk, D]
          const auto v_t = head_rows<T>(v, b, g, j0, bk);
          Dense<T> s(s_buf.data(), bq, bk);
          s.noalias() = q_t * k_t.transpose();  // 1. s = q k^T: [bq, bk] (unscaled)

          for (std::int64_t r = 0; r < bq; ++r) {
            auto row = s.row(r);
            const std::int64_t c = mask == TileMask::partial ? visible_prefix(k_pos, j0, j0 + bk, q_pos[i0 + r]) : bk;
            if (c == 0) {  // this row sees none of these keys
              row.setZero();
              continue;
            }
            // 2. m' = max(m, rowmax(s)); alpha = exp(scale (m - m')), 0 while m = -inf
            const T m_new = std::max(m[r], row.head(c).maxCoeff());
            const T alpha = std::exp(sc * (m[r] - m_new));
            // 3. p = exp(scale (s - m')) on the visible keys, 0 on the masked ones
            row.head(c) = ((row.head(c).array() - m_new) * sc).exp();
            row.tail(bk - c).setZero();
            // 4. l = alpha l + rowsum(p); acc = alpha acc
            l[r] = alpha * l[r] + row.head(c).sum();
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
                          const View& dv, bool causal, double scale, int tile) {
  check_ascending(q_pos, "query positions");
  check_ascending(k_pos, "key positions");
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
            const TileMask mask = classify(q_pos, i0, i0 + bq, k_pos, j0, j0 + bk, causal);
            if (mask == TileMask::masked) {
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
              const std::int64_t c = mask == TileMask::partial ? visible_prefix(k_pos, j0, j0 + bk, q_pos[i0 + r]) : bk;
              const T lse_r = lse_h[i0 + r];
              if (c == 0 || lse_r == kNegInf) {  // no visible key here, or none anywhere: no gradient
                row.setZero();
                continue;
              }
              row.head(c) = (row.head(c).array() * sc - lse_r).exp();  // 3. p = exp(scale s - lse)
              row.tail(bk - c).setZero();
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
                                         const View&, const View&, bool, double, int);
template TileCounts tiled_forward<double>(const View&, const Positions&, const View&, const View&, const Positions&,
                                          const View&, const View&, bool, double, int);
template TileCounts tiled_backward<float>(const View&, const Positions&, const View&, const View&, const Positions&,
                                          const View&, const View&, const View&, const View&, const View&, const View&,
                                          bool, double, int);
template TileCounts tiled_backward<double>(const View&, const Positions&, const View&, const View&, const Positions&,
                                           const View&, const View&, const View&, const View&, const View&, const View&,
                                           bool, double, int);

}  // namespace cpsim
