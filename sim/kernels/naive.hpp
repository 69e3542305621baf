// The textbook attention loops, templated on the arithmetic type T (internal to sim/kernels).
//   T = double: the reference (reference.cpp).  T = float: the plain single-precision baseline (plain.cpp).
// One query row at a time: scores of the keys it sees, softmax with the row max subtracted, weighted sum of values.
// Shapes and formulas: reference.hpp. Inputs are converted to T before any arithmetic.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "sim/core/positions.hpp"
#include "sim/kernels/reference.hpp"

namespace cpsim::naive {

template <class T>
std::vector<T> to(const std::vector<double>& x) {
  return std::vector<T>(x.begin(), x.end());
}

template <class T>
T dot(const T* a, const T* b, std::int64_t n) {
  T s = 0;
  for (std::int64_t d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

// Index helpers for [B, S, N, D] and [B, N, S].
struct Index {
  AttentionShape sh;
  std::int64_t q(std::int64_t b, std::int64_t i, std::int64_t h) const { return ((b * sh.Sq + i) * sh.Nq + h) * sh.D; }
  std::int64_t k(std::int64_t b, std::int64_t j, std::int64_t g) const { return ((b * sh.Sk + j) * sh.Nkv + g) * sh.D; }
  std::int64_t lse(std::int64_t b, std::int64_t h, std::int64_t i) const { return (b * sh.Nq + h) * sh.Sq + i; }
};

// The probabilities of one query row: p[j] over the visible keys vis[j]; returns lse (-inf when none visible).
template <class T>
T row_softmax(const T* qi, const std::vector<T>& k, const Index& ix, std::int64_t b, std::int64_t g,
              const std::vector<std::int64_t>& vis, T scale, std::vector<T>& p) {
  p.resize(vis.size());
  if (vis.empty()) return -std::numeric_limits<T>::infinity();
  T m = -std::numeric_limits<T>::infinity();
  for (std::size_t t = 0; t < vis.size(); ++t) {
    p[t] = scale * dot(qi, &k[ix.k(b, vis[t], g)], ix.sh.D);  // s_ij
    m = std::max(m, p[t]);
  }
  T sum = 0;
  for (auto& x : p) sum += (x = std::exp(x - m));  // exp(s_ij - max)
  for (auto& x : p) x /= sum;                      // p_ij
  return m + std::log(sum);                        // lse_i
}

// Keys row i sees: every j the mask makes visible to q_pos[i] (the definition, one pair at a time).
inline void visible_keys(const std::vector<std::int64_t>& k_pos, std::int64_t qp, const Mask& mask,
                         std::vector<std::int64_t>& vis) {
  vis.clear();
  for (std::size_t j = 0; j < k_pos.size(); ++j)
    if (mask.visible(qp, k_pos[j])) vis.push_back(static_cast<std::int64_t>(j));
}

template <class T>
RefForward forward(const std::vector<double>& q_in, const std::vector<double>& k_in, const std::vector<double>& v_in,
                   const AttentionShape& sh, const Positions& q_runs, const Positions& k_runs, const Mask& mask,
                   double scale_in) {
  check_reference_args(sh, q_in.size(), k_in.size(), v_in.size(), q_runs, k_runs);
  const std::vector<std::int64_t> q_pos = q_runs.expand(), k_pos = k_runs.expand();
  const auto q = to<T>(q_in), k = to<T>(k_in), v = to<T>(v_in);
  const T scale = static_cast<T>(attention_scale(sh.D, scale_in));
  const Index ix{sh};
  const std::int64_t group = sh.Nq / sh.Nkv;
  std::vector<T> out(q.size(), T(0)), lse(static_cast<std::size_t>(sh.B * sh.Nq * sh.Sq));
  std::vector<std::int64_t> vis;
  std::vector<T> p;
  for (std::int64_t b = 0; b < sh.B; ++b)
    for (std::int64_t i = 0; i < sh.Sq; ++i) {
      visible_keys(k_pos, q_pos[static_cast<std::size_t>(i)], mask, vis);
      for (std::int64_t h = 0; h < sh.Nq; ++h) {
        const std::int64_t g = h / group;
        lse[ix.lse(b, h, i)] = row_softmax(&q[ix.q(b, i, h)], k, ix, b, g, vis, scale, p);
        T* oi = &out[ix.q(b, i, h)];
        for (std::size_t t = 0; t < vis.size(); ++t) {  // out_i = sum_j p_ij v_j
          const T* vj = &v[ix.k(b, vis[t], g)];
          for (std::int64_t d = 0; d < sh.D; ++d) oi[d] += p[t] * vj[d];
        }
      }
    }
  return {std::vector<double>(out.begin(), out.end()), std::vector<double>(lse.begin(), lse.end())};
}

template <class T>
RefBackward backward(const std::vector<double>& q_in, const std::vector<double>& k_in, const std::vector<double>& v_in,
                     const std::vector<double>& dout_in, const AttentionShape& sh, const Positions& q_runs,
                     const Positions& k_runs, const Mask& mask, double scale_in) {
  check_reference_args(sh, q_in.size(), k_in.size(), v_in.size(), q_runs, k_runs);
  check_reference_args(sh, dout_in.size(), k_in.size(), v_in.size(), q_runs, k_runs);
  const std::vector<std::int64_t> q_pos = q_runs.expand(), k_pos = k_runs.expand();
  const auto q = to<T>(q_in), k = to<T>(k_in), v = to<T>(v_in), dout = to<T>(dout_in);
  const T scale = static_cast<T>(attention_scale(sh.D, scale_in));
  const Index ix{sh};
  const std::int64_t group = sh.Nq / sh.Nkv;
  std::vector<T> dq(q.size(), T(0)), dk(k.size(), T(0)), dv(v.size(), T(0));
  std::vector<std::int64_t> vis;
  std::vector<T> p, dp;
  for (std::int64_t b = 0; b < sh.B; ++b)
    for (std::int64_t i = 0; i < sh.Sq; ++i) {
      visible_keys(k_pos, q_pos[static_cast<std::size_t>(i)], mask, vis);
      for (std::int64_t h = 0; h < sh.Nq; ++h) {
        const std::int64_t g = h / group;
        const T* qi = &q[ix.q(b, i, h)];
        const T* doi = &dout[ix.q(b, i, h)];
        row_softmax(qi, k, ix, b, g, vis, scale, p);
        dp.resize(vis.size());
        T Di = 0;
        for (std::size_t t = 0; t < vis.size(); ++t) {
          dp[t] = dot(doi, &v[ix.k(b, vis[t], g)], sh.D);  // dp_ij = dout_i . v_j
          Di += p[t] * dp[t];                              // D_i = sum_j p_ij dp_ij
        }
        T* dqi = &dq[ix.q(b, i, h)];
        for (std::size_t t = 0; t < vis.size(); ++t) {
          const std::int64_t kj = ix.k(b, vis[t], g);
          const T ds = scale * p[t] * (dp[t] - Di);  // scale * ds_ij
          for (std::int64_t d = 0; d < sh.D; ++d) {
            dqi[d] += ds * k[kj + d];     // dq_i += scale ds_ij k_j
            dk[kj + d] += ds * qi[d];     // dk_j += scale ds_ij q_i
            dv[kj + d] += p[t] * doi[d];  // dv_j += p_ij dout_i
          }
        }
      }
    }
  auto back = [](const std::vector<T>& x) { return std::vector<double>(x.begin(), x.end()); };
  return {back(dq), back(dk), back(dv)};
}

}  // namespace cpsim::naive
