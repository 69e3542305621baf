#include "sim/layout/layout.hpp"

#include <doctest/doctest.h>

#include <numeric>

#include "sim/core/error.hpp"
#include "sim/layout/documents.hpp"

using namespace cpsim;

namespace {
LayoutOptions with_docs(std::vector<std::int64_t> lengths, std::int64_t seq, int ranks) {
  DocSpec spec;
  spec.lengths = std::move(lengths);
  LayoutOptions opt;
  opt.docs = resolve_documents(spec, seq, ranks);
  return opt;
}

// A rank's spans as [lo, hi) pairs.
std::vector<std::pair<std::int64_t, std::int64_t>> ranges(const std::vector<Span>& spans) {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (const Span& s : spans) out.emplace_back(s.lo, s.hi);
  return out;
}
using Ranges = std::vector<std::pair<std::int64_t, std::int64_t>>;

std::vector<std::vector<int>> all_chunks(const SeqLayout& L) {
  std::vector<std::vector<int>> out;
  for (int r = 0; r < L.ranks(); ++r) out.push_back(L.chunks(r));
  return out;
}
}  // namespace

TEST_CASE("zigzag gives rank r chunks r and 2C-1-r") {
  const SeqLayout L(4, 32, Sharding::zigzag);
  CHECK(all_chunks(L) == std::vector<std::vector<int>>{{0, 7}, {1, 6}, {2, 5}, {3, 4}});
}

TEST_CASE("zigzag with C=2 and S=8 gives rank 0 chunks 0 and 3 of four two-token chunks") {
  // Four chunks of t=2: rank 0 owns chunks 0 and 3 -> positions 0,1,6,7; rank 1 owns 1 and 2 -> 2,3,4,5.
  // (The set [[0,3,4,7],[1,2,5,6]] is what per-document zigzag gives for two 4-token documents; see
  // docs/concepts.md. One sequence of 8 tokens follows the chunk rule below.)
  const SeqLayout L(2, 8, Sharding::zigzag);
  CHECK(L.positions(0) == Positions{0, 1, 6, 7});
  CHECK(L.positions(1) == Positions{2, 3, 4, 5});
}

TEST_CASE("zigzag with C=2 and S=4 gives positions 0,3 and 1,2") {
  const SeqLayout L(2, 4, Sharding::zigzag);
  CHECK(L.positions(0) == Positions{0, 3});
  CHECK(L.positions(1) == Positions{1, 2});
}

TEST_CASE("contiguous gives rank r one run of S/C positions") {
  const SeqLayout L(3, 12, Sharding::contiguous);
  CHECK(L.positions(1) == Positions{4, 5, 6, 7});
  CHECK(L.owner(11) == 2);
}

TEST_CASE("contiguous per document gives rank r piece r of C of every document, one run each") {
  // Documents 8, 16, 8 on C=4: pieces of 2, 4 and 2 tokens starting at 0, 8 and 24.
  const SeqLayout L(4, 32, Sharding::doc_contiguous, with_docs({8, 16, 8}, 32, 4));
  CHECK(L.describe() == "contiguous per document");
  CHECK(L.per_document());
  CHECK(ranges(L.spans(0)) == Ranges{{0, 2}, {8, 12}, {24, 26}});
  CHECK(ranges(L.spans(1)) == Ranges{{2, 4}, {12, 16}, {26, 28}});
  CHECK(ranges(L.spans(3)) == Ranges{{6, 8}, {20, 24}, {30, 32}});
  for (int r = 0; r < 4; ++r) CHECK(L.positions(r).runs().size() == 3);
  for (std::int64_t pos = 0; pos < 32; ++pos) {
    bool owned = false;
    for (std::int64_t q : L.positions(L.owner(pos))) owned = owned || q == pos;
    CHECK(owned);
  }
  // Two ranks of the grouped layout own what ranks 0-1 and 2-3 own: piece g of 2 of every document.
  CHECK(ranges(L.grouped(2).spans(1)) == Ranges{{4, 8}, {16, 24}, {28, 32}});
}

TEST_CASE("contiguous per document is the contiguous sharding with one document") {
  const SeqLayout one(4, 32, Sharding::doc_contiguous), plain(4, 32, Sharding::contiguous);
  CHECK(one.describe() == "contiguous");
  CHECK_FALSE(one.per_document());
  for (int r = 0; r < 4; ++r) CHECK(ranges(one.spans(r)) == ranges(plain.spans(r)));
}

TEST_CASE("contiguous per document refuses a document whose length C does not divide, naming --pad-docs") {
  // 10 is not divisible by C=4 (12 is: a multiple of C, not of 2C, is accepted).
  CHECK_NOTHROW(SeqLayout(4, 32, Sharding::doc_contiguous, with_docs({12, 12, 8}, 32, 4)));
  CHECK_THROWS_WITH_AS(SeqLayout(4, 32, Sharding::doc_contiguous, with_docs({10, 14, 8}, 32, 4)),
                       doctest::Contains("every length must be divisible by 4 (document 0 has 10 tokens, document 1 "
                                         "has 14 tokens); pad them with --pad-docs"),
                       UsageError);
  CHECK(parse_sharding("doc-contiguous") == Sharding::doc_contiguous);
  CHECK_THROWS_WITH_AS(parse_sharding("per-doc"), doctest::Contains("doc-contiguous"), UsageError);
}

TEST_CASE("every position has exactly one owner and owner agrees with positions") {
  for (Sharding sh : {Sharding::zigzag, Sharding::contiguous})
    for (int C : {1, 2, 3, 4, 8}) {
      const SeqLayout L(C, 16 * C, sh);
      std::vector<int> seen(static_cast<std::size_t>(L.seq()), 0);
      for (int r = 0; r < C; ++r)
        for (auto p : L.positions(r)) {
          ++seen[static_cast<std::size_t>(p)];
          CHECK(L.owner(p) == r);
        }
      CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
    }
}

TEST_CASE("shard then unshard returns the global tensor for several C and S") {
  for (Sharding sh : {Sharding::zigzag, Sharding::contiguous})
    for (int C : {1, 2, 3, 4, 8})
      for (std::int64_t mult : {1, 3}) {
        const SeqLayout L(C, 2 * C * mult, sh);
        const std::int64_t B = 2, E = 3;
        std::vector<double> g(static_cast<std::size_t>(B * L.seq() * E));
        std::iota(g.begin(), g.end(), 0.0);
        std::vector<std::vector<double>> locals;
        for (int r = 0; r < C; ++r) locals.push_back(shard(L, g, B, E, r));
        CHECK(unshard(L, locals, B, E) == g);
        // Row i of rank r's shard is position positions(r)[i].
        const auto pos = L.positions(C - 1);
        CHECK(locals[C - 1][static_cast<std::size_t>(E)] == g[static_cast<std::size_t>(pos[1] * E)]);
      }
}

TEST_CASE("rank order to sequence order is a permutation and seq_to_rank is its inverse") {
  const SeqLayout L(4, 16, Sharding::zigzag);
  const auto fwd = L.rank_to_seq();
  const auto inv = L.seq_to_rank();
  // Gathered chunk order for C=4 is [0, 7, 1, 6, 2, 5, 3, 4] (t = 2 tokens each).
  CHECK(fwd[0] == 0);
  CHECK(fwd[2] == 14);
  CHECK(fwd[4] == 2);
  for (std::size_t i = 0; i < fwd.size(); ++i) CHECK(inv[static_cast<std::size_t>(fwd[i])] == static_cast<std::int64_t>(i));
}

TEST_CASE("impossible layouts are refused with the constraint and a fix") {
  CHECK_THROWS_WITH_AS(SeqLayout(4, 10, Sharding::zigzag),
                       doctest::Contains("S must be divisible by 2C (S=10, 2C=8); use --seq 16"), UsageError);
  CHECK_THROWS_WITH_AS(SeqLayout(3, 10, Sharding::contiguous), doctest::Contains("use --seq 12"), UsageError);
  CHECK_THROWS_WITH_AS(SeqLayout(0, 16, Sharding::zigzag), doctest::Contains("at least 1"), UsageError);
  CHECK_THROWS_AS(SeqLayout(2, 0, Sharding::contiguous), UsageError);
  CHECK_THROWS_AS(parse_sharding("diagonal"), UsageError);
}
