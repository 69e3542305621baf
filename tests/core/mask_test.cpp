// The mask's rule and the visible-pair formulas, against brute force over every (query, key) pair.
#include "sim/core/mask.hpp"

#include <doctest/doctest.h>

#include <limits>
#include <random>

#include "sim/core/error.hpp"

using namespace cpsim;

namespace {

// The definition in mask.hpp, written out: same document, then causal (k <= q) and the window.
bool visible_by_definition(std::int64_t q, std::int64_t k, bool causal, std::int64_t W,
                           const std::vector<std::int64_t>& bounds) {
  for (std::size_t d = 0; d + 1 < bounds.size(); ++d) {
    const bool q_in = bounds[d] <= q && q < bounds[d + 1], k_in = bounds[d] <= k && k < bounds[d + 1];
    if (q_in != k_in) return false;
  }
  if (causal && k > q) return false;
  if (W > 0 && (causal ? q - k >= W : std::abs(q - k) >= W)) return false;
  return true;
}

std::int64_t brute_pairs(const Positions& q, const Positions& k, const Mask& m) {
  std::int64_t n = 0;
  for (std::int64_t a : q)
    for (std::int64_t b : k) n += m.visible(a, b) ? 1 : 0;
  return n;
}

// Random ascending positions in [0, S) as a few runs of every kind: ranges, strided runs, runs of blocks.
Positions random_positions(std::mt19937_64& rng, std::int64_t S) {
  Positions p;
  std::int64_t at = static_cast<std::int64_t>(rng() % 4);
  while (at < S) {
    const int kind = static_cast<int>(rng() % 3);
    const std::int64_t width = kind == 2 ? 1 + static_cast<std::int64_t>(rng() % 3) : 1;
    const std::int64_t stride = kind == 0 ? 1 : width + 1 + static_cast<std::int64_t>(rng() % 4);
    const std::int64_t blocks = 1 + static_cast<std::int64_t>(rng() % 5);
    const std::int64_t count = kind == 0 ? blocks : blocks * width;
    const PosRun r{at, count, stride, width};
    if (r.last() >= S) break;
    p.append(r);
    at = r.last() + 1 + static_cast<std::int64_t>(rng() % 5);
  }
  return p;
}

std::vector<std::int64_t> random_bounds(std::mt19937_64& rng, std::int64_t S) {
  std::vector<std::int64_t> b{0};
  while (b.back() < S) b.push_back(std::min(S, b.back() + 1 + static_cast<std::int64_t>(rng() % 12)));
  return b;
}

}  // namespace

TEST_CASE("the mask's lo and hi follow its definition for every mask") {
  std::mt19937_64 rng(3);
  const std::int64_t S = 40;
  for (int trial = 0; trial < 40; ++trial) {
    const bool causal = trial % 2 == 0;
    const std::int64_t W = trial % 3 == 0 ? 0 : 1 + static_cast<std::int64_t>(rng() % 9);
    const std::vector<std::int64_t> bounds = trial % 4 < 2 ? random_bounds(rng, S) : std::vector<std::int64_t>{};
    const Mask m(causal, W, bounds);
    CAPTURE(m.describe());
    for (std::int64_t q = 0; q < S; ++q)
      for (std::int64_t k = 0; k < S; ++k) {
        CAPTURE(q);
        CAPTURE(k);
        CHECK(m.visible(q, k) == visible_by_definition(q, k, causal, W, bounds));
      }
  }
}

TEST_CASE("visible pairs by formula equal the brute-force count on random runs under random masks") {
  std::mt19937_64 rng(7);
  const std::int64_t S = 90;
  for (int trial = 0; trial < 400; ++trial) {
    const bool causal = trial % 2 == 0;
    const std::int64_t W = trial % 3 == 0 ? 0 : 1 + static_cast<std::int64_t>(rng() % 20);
    const Mask m(causal, W, trial % 5 < 3 ? random_bounds(rng, S) : std::vector<std::int64_t>{});
    const Positions q = random_positions(rng, S), k = random_positions(rng, S);
    CAPTURE(m.describe());
    CAPTURE(q.text());
    CAPTURE(k.text());
    CHECK(visible_pairs(q, k, m) == brute_pairs(q, k, m));
  }
}

TEST_CASE("documents see the sum of L(L+1)/2 pairs and a window S W - W(W-1)/2") {
  const std::vector<std::int64_t> L{24, 8, 32, 1, 63};
  std::vector<std::int64_t> bounds{0};
  std::int64_t want = 0;
  for (std::int64_t l : L) {
    bounds.push_back(bounds.back() + l);
    want += l * (l + 1) / 2;
  }
  const std::int64_t S = bounds.back();
  const Positions all = Positions::range(0, S);
  CHECK(visible_pairs(all, all, Mask(true, 0, bounds)) == want);
  for (std::int64_t W : {std::int64_t{1}, std::int64_t{2}, std::int64_t{17}, std::int64_t{64}, S}) {
    CAPTURE(W);
    CHECK(visible_pairs(all, all, Mask(true, W, {})) == S * W - W * (W - 1) / 2);
  }
  CHECK(visible_pairs(all, all, Mask(true)) == S * (S + 1) / 2);
  CHECK(visible_pairs(all, all, Mask(false)) == S * S);
  // At S = 1M the formula answers without touching a position (the count needs 128-bit-safe floor sums).
  const std::int64_t big = std::int64_t{1} << 20, W = 4096;
  CHECK(visible_pairs(Positions::range(0, big), Positions::range(0, big), Mask(true, W, {})) ==
        big * W - W * (W - 1) / 2);
}

TEST_CASE("a window longer than every distance counts the pairs of no window, up to 2^63 - 1, without wrapping") {
  const std::int64_t huge = std::numeric_limits<std::int64_t>::max();
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 60; ++trial) {
    const bool causal = trial % 2 == 0;
    const auto bounds = trial % 3 == 0 ? random_bounds(rng, 90) : std::vector<std::int64_t>{};
    const Positions q = random_positions(rng, 90), k = random_positions(rng, 90);
    for (std::int64_t W : {std::int64_t{90}, huge - 1, huge}) {
      CAPTURE(W);
      CHECK(visible_pairs(q, k, Mask(causal, W, bounds)) == visible_pairs(q, k, Mask(causal, 0, bounds)));
    }
  }
  // lo and hi saturate: the full mask's hi(q) = q + W - 1 would pass 2^63.
  const Mask full(false, huge, {});
  CHECK(full.hi(huge - 2) == Mask::kUnlimited);
  CHECK(full.lo(5) == 5 - (huge - 1));
  CHECK(full.visible(huge - 2, 0));
  CHECK(full.visible(0, huge - 2));
  // Positions near 2^63: S = 2^63 - 1 with a window of 3 is 3 S - 3 pairs, past 64 bits only in the wide count.
  const Positions all = Positions::range(0, huge);
  CHECK(visible_pairs_wide(all, all, Mask(true, 3, {})) == PairCount{huge} * 3 - 3);
  CHECK(count_text(visible_pairs_wide(all, all, Mask(true, 3, {}))) == "27670116110564327418");
  CHECK_THROWS_AS(visible_pairs(all, all, Mask(true, 3, {})), Error);
}

TEST_CASE("pair_count_fits says whether a sequence's pair counts fit in 64 bits") {
  PairCount n = 0;
  // Causal S (S + 1) / 2: S = 2^32 gives 2^63 + 2^31, one past what int64 holds; S = 2^32 - 1 fits.
  CHECK_FALSE(pair_count_fits(std::int64_t{1} << 32, Mask(true), &n));
  CHECK(n == (PairCount{1} << 63) + (PairCount{1} << 31));
  CHECK(count_text(n) == "9223372039002259456");
  CHECK(pair_count_fits((std::int64_t{1} << 32) - 1, Mask(true), &n));
  CHECK(n == PairCount{(std::int64_t{1} << 32) - 1} * (std::int64_t{1} << 32) / 2);
  CHECK_FALSE(pair_count_fits(std::int64_t{1} << 62, Mask(true)));
  CHECK(pair_count_fits(std::int64_t{1} << 62, Mask(true, 1, {})));
}

TEST_CASE("floor_sum equals the sum it names") {
  for (std::int64_t n = 0; n < 12; ++n)
    for (std::int64_t m = 1; m < 9; ++m)
      for (std::int64_t a = 0; a < 11; ++a)
        for (std::int64_t b = 0; b < 11; ++b) {
          std::int64_t want = 0;
          for (std::int64_t i = 0; i < n; ++i) want += (a * i + b) / m;
          CHECK(floor_sum(n, m, a, b) == want);
        }
}

TEST_CASE("bad masks are refused and one document is no document") {
  CHECK_THROWS_AS(Mask(true, -1, {}), Error);
  CHECK_THROWS_AS(Mask(true, 0, {0, 8, 8, 16}), Error);
  CHECK_THROWS_AS(Mask(true, 0, {1, 8, 16}), Error);
  CHECK(Mask(true, 0, {0, 16}) == Mask(true));
  CHECK(Mask(true, 0, {0, 16}).plain());
  CHECK_FALSE(Mask(true, 4, {}).plain());
  CHECK(Mask(false, 8, {0, 4, 12}).describe() == "full, 2 documents, window 8");
}
