// Merging two partial attention results over the same query rows by their log-sum-exp.
//
// A partial result (out_x, lse_x) is attention over a subset of the keys: out_x is normalised within that subset
// and exp(lse_x) is the subset's total softmax weight. Over the union of two disjoint subsets:
//   lse = logaddexp(lse_a, lse_b) = max + log1p(exp(min - max))          (stable: exp of a value <= 0)
//   out = exp(lse_a - lse) out_a + exp(lse_b - lse) out_b
// Both -inf (neither subset has a visible key yet): out_a unchanged, lse -inf, never NaN.
// Works on any views (a subset of rows, heads or batches): out views [B, s, N, D], lse views [B, N, s].
#pragma once
#include "sim/core/buffer.hpp"

namespace cpsim {

// out_acc, lse_acc <- merge((out_acc, lse_acc), (out_t, lse_t)). Every view must hold T (float or double);
// throws Error when the extents differ.
template <class T>
void merge_partials(const View& out_acc, const View& lse_acc, const View& out_t, const View& lse_t);

}  // namespace cpsim
