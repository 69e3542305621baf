#include "sim/kernels/merge.hpp"

#include <algorithm>
#include <cmath>

#include "sim/core/error.hpp"
#include "sim/kernels/view_checks.hpp"

namespace cpsim {

template <class T>
void merge_partials(const View& out_acc, const View& lse_acc, const View& out_t, const View& lse_t) {
  check_merge_views(out_acc, lse_acc, out_t, lse_t);
  const std::int64_t D = out_acc.d();
  for (std::int64_t b = 0; b < out_acc.nb; ++b)
    for (std::int64_t h = 0; h < out_acc.nh; ++h) {
      T* la = lse_acc.buf.as<T>() + lse_acc.buf.offset(lse_acc.b0 + b, lse_acc.s0, lse_acc.h0 + h);
      const T* lb = lse_t.buf.as<T>() + lse_t.buf.offset(lse_t.b0 + b, lse_t.s0, lse_t.h0 + h);
      for (std::int64_t s = 0; s < out_acc.ns; ++s) {
        const T a = la[s], c = lb[s];
        if (std::isinf(c) && c < 0) continue;  // nothing to add (covers both -inf): out_acc, lse_acc unchanged
        T* oa = out_acc.buf.as<T>() + out_acc.buf.offset(out_acc.b0 + b, out_acc.s0 + s, out_acc.h0 + h);
        const T* ob = out_t.buf.as<T>() + out_t.buf.offset(out_t.b0 + b, out_t.s0 + s, out_t.h0 + h);
        // lse = max + log1p(exp(min - max)); weights exp(lse_x - lse)
        const T hi = std::max(a, c), lo = std::min(a, c);
        const T lse = hi + std::log1p(std::exp(lo - hi));
        const T wa = std::exp(a - lse), wb = std::exp(c - lse);
        if (wa == T(0)) {
          for (std::int64_t d = 0; d < D; ++d) oa[d] = wb * ob[d];  // the accumulator held no weight yet
        } else {
          for (std::int64_t d = 0; d < D; ++d) oa[d] = wa * oa[d] + wb * ob[d];
        }
        la[s] = lse;
      }
    }
}

template void merge_partials<float>(const View&, const View&, const View&, const View&);
template void merge_partials<double>(const View&, const View&, const View&, const View&);

}  // namespace cpsim
