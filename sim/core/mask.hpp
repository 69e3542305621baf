// The attention mask: which keys a query sees. One description every Device call, the reference and the counting
// take, so that tile skipping, visible-pair counts and the check all follow the same rule.
//
// A key at position k is visible to a query at position q when
//   same document    bounds[d] <= q, k < bounds[d+1] for one d         (no documents: always)
//   causal           k <= q                                             (full: no condition)
//   window W         causal: q - k < W;  full: |q - k| < W              (W = 0: no window)
// The masks this makes: causal (the default), full, documents (Llama 3's document mask; Transformer Engine's THD
// cu_seqlens), a sliding window (Mistral), documents with a window; with --full, their bidirectional forms.
// For every mask the visible keys of one query form one range of positions [lo(q), hi(q)], and lo and hi never
// decrease as q grows: kernels find a row's visible keys among ascending key positions with two binary searches.
//
// Positions lie in [0, S) with S <= 2^63 - 1, so a window can be any int64: lo and hi saturate instead of wrapping
// (q + W - 1 for W = 2^63 - 1 is "no limit"), and a window at least as long as every distance between positions
// masks nothing, the same as no window.
//
// A Mask is a cheap value: copies share the document bounds.
#pragma once
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "sim/core/positions.hpp"

namespace cpsim {

class Mask {
 public:
  // true: causal, false: full (the two masks every device implements). Implicit, so that AttentionOptions{true, ...}
  // reads as it always has.
  Mask(bool causal = true);  // NOLINT(google-explicit-constructor)
  // bounds: cu_seqlens, the documents' starts and the end, [0, L1, L1 + L2, ..., S]; empty or {0, S}: one document.
  Mask(bool causal, std::int64_t window, std::vector<std::int64_t> bounds);

  bool causal() const { return causal_; }
  std::int64_t window() const { return window_; }
  bool has_documents() const { return bounds_ != nullptr; }
  const std::vector<std::int64_t>& bounds() const;  // empty without documents
  std::int64_t documents() const { return bounds_ ? static_cast<std::int64_t>(bounds_->size()) - 1 : 1; }
  // Causal or full: no documents and no window (what the CUDA device implements).
  bool plain() const { return !bounds_ && window_ == 0; }

  // The document holding position p (0 without documents).
  std::int64_t document_of(std::int64_t p) const;
  // The visible keys of a query at q: positions [lo(q), hi(q)] (with documents, inside q's document).
  std::int64_t lo(std::int64_t q) const;
  std::int64_t hi(std::int64_t q) const;
  bool visible(std::int64_t q, std::int64_t k) const { return lo(q) <= k && k <= hi(q); }

  // "causal", "full", "causal, 3 documents", "causal, window 256", "full, 2 documents, window 8".
  std::string describe() const;
  bool operator==(const Mask& o) const;

  // Beyond every position (positions are at most 2^63 - 2): lo/hi when a side is not limited. hi + 1 still fits.
  static constexpr std::int64_t kUnlimited = std::numeric_limits<std::int64_t>::max() - 1;

 private:
  bool causal_ = true;
  std::int64_t window_ = 0;
  std::shared_ptr<const std::vector<std::int64_t>> bounds_;  // null: one document
};

// Visible (query, key) pairs of one head, counted by formula on the runs (never position by position): for each
// document, each pair of arithmetic progressions (one of queries, one of keys) contributes
//   #{(i, j) : lo(q_i) <= k_j <= hi(q_i)} = F(hi offset) - F(lo offset - 1),  F(d) = #{(i, j) : k_j <= q_i + d},
// and F is a floor sum, sum_i floor((a i + b) / m), computed in O(log) steps. Cost: O(runs x runs) without
// documents, O(runs + documents) with them (each run is cut at the document bounds it crosses).
// The count is exact in 128 bits (at most S^2 < 2^126); visible_pairs throws Error when it does not fit in 64 bits
// (commands that take S from input refuse such sizes first: pair_count_fits).
using PairCount = __int128;
PairCount visible_pairs_wide(const Positions& q, const Positions& k, const Mask& mask);
std::int64_t visible_pairs(const Positions& q, const Positions& k, const Mask& mask);
// Whether every pair count of a sequence of S tokens under `mask` fits in 64 bits: the whole sequence's visible
// pairs per head (every other count is a part of it). `pairs` receives that count.
bool pair_count_fits(std::int64_t S, const Mask& mask, PairCount* pairs = nullptr);
// "9223372039002259456": a wide count in decimal.
std::string count_text(PairCount n);

// sum_{i=0}^{n-1} floor((a i + b) / m) for n, a, b >= 0 and m >= 1 (the AtCoder Library's floor_sum); the result
// must fit in 64 bits (floor_sum_wide: in 128).
std::int64_t floor_sum(std::int64_t n, std::int64_t m, std::int64_t a, std::int64_t b);
PairCount floor_sum_wide(std::int64_t n, std::int64_t m, std::int64_t a, std::int64_t b);

}  // namespace cpsim
