// Every mask x sharding x strategy against the single-process f64 reference with the same mask, forward and
// backward, at tiny shapes (C in {2, 3, 4, 8}, GQA), on threads and processes; and the document-boundary mutation.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "sim/runtime/inputs.hpp"
#include "strategy_cases.hpp"

using namespace cpsim;

namespace {

struct MaskCase {
  const char* name;
  bool causal;
  std::int64_t window;
  bool docs;
};

// The masks of issue 19: documents, a window, both; and the bidirectional forms of documents and windows.
constexpr MaskCase kMasks[] = {
    {"documents", true, 0, true},        {"window 7", true, 7, false},        {"documents, window 5", true, 5, true},
    {"full, window 6", false, 6, false}, {"full, documents", false, 0, true},
};

// S = 20C tokens; documents of 4, 2, 3 and 1 units of 2C (every one divisible by 2C: per-document zigzag cuts them).
RunConfig masked(StrategyKind s, Sharding sh, int C, const MaskCase& m, Backend be = Backend::threads) {
  RunConfig c = test::config(s, sh, C, be);
  Problem& p = c.problem;
  p.batch = 1;
  p.seq = 20 * C;
  p.heads = 2 * C;  // ulysses splits heads C ways; GQA 2:1
  p.kv_heads = C;
  p.kv_replicate = false;
  p.head_dim = 8;
  if (s == StrategyKind::hybrid) p.a2a = C % 2 == 0 ? 2 : C;
  p.causal = m.causal;
  p.window = m.window;
  if (m.docs) {
    const std::int64_t u = 2 * C;
    p.docs.lengths = {4 * u, 2 * u, 3 * u, u};
  }
  return c;
}

std::string label(const RunConfig& c, const MaskCase& m) {
  const Problem& p = c.problem;
  return std::string(strategy_name(c.strategy)) + " " + std::string(sharding_name(p.sharding)) + " " + m.name +
         " C=" + std::to_string(p.ranks) + " " + std::string(backend_name(c.backend));
}

void expect_correct(const RunConfig& c, const MaskCase& m) {
  INFO(label(c, m));
  const RunResult r = run(c);
  REQUIRE(r.check.ran);
  CHECK(r.check.err.out <= r.check.allowed.out);
  CHECK(r.check.err.lse <= r.check.allowed.lse);
  CHECK(r.check.err.dq <= r.check.allowed.dq);
  CHECK(r.check.err.dk <= r.check.allowed.dk);
  CHECK(r.check.err.dv <= r.check.allowed.dv);
  CHECK(r.check.passed);
}

}  // namespace

TEST_CASE("every strategy matches the reference under every mask and sharding, forward and backward, threads") {
  for (int C : {2, 3, 4, 8})
    for (const MaskCase& m : kMasks)
      for (Sharding sh : all_shardings())
        for (StrategyKind s : all_strategies()) expect_correct(masked(s, sh, C, m), m);
}

TEST_CASE("a window of 2^63 - 1 masks nothing: every strategy matches the reference as without a window") {
  constexpr std::int64_t kHuge = std::numeric_limits<std::int64_t>::max();
  constexpr MaskCase kHugeWindows[] = {{"causal, window 2^63-1", true, kHuge, false},
                                       {"full, window 2^63-1", false, kHuge, false},
                                       {"documents, window 2^63-1", true, kHuge, true},
                                       {"full, documents, window 2^63-1", false, kHuge, true}};
  for (const MaskCase& m : kHugeWindows)
    for (Sharding sh : all_shardings())
      for (StrategyKind s : all_strategies()) expect_correct(masked(s, sh, 4, m), m);
}

TEST_CASE("every strategy matches the reference under every mask and sharding on the processes backend") {
  for (const MaskCase& m : kMasks)
    for (Sharding sh : all_shardings())
      for (StrategyKind s : all_strategies()) expect_correct(masked(s, sh, 4, m, Backend::processes), m);
}

TEST_CASE("padded documents run every strategy and the padding is left out of the check") {
  const MaskCase m{"documents (padded)", true, 0, true};
  for (Sharding sh : {Sharding::zigzag, Sharding::doc_contiguous})
    for (StrategyKind s : all_strategies()) {
      RunConfig c = masked(s, sh, 4, m);
      c.problem.docs.lengths = {13, 8, 21, 6};  // padded to 16, 8, 24, 8: S = 56
      c.problem.docs.pad = true;
      c.problem.seq = 56;
      INFO(strategy_name(s), " ", sharding_name(sh));
      const RunResult r = run(c);
      REQUIRE(r.check.ran);
      CHECK(r.check.passed);
    }
}

TEST_CASE("moving one document boundary changes the output exactly in the rows of the two documents it touches") {
  // Documents 16, 24, 24 -> 16, 32, 16: the boundary between documents 1 and 2 moves from 40 to 48. Rows [0, 16)
  // (document 0) must not change; rows [40, 48) change document and rows [48, 64) lose keys [40, 48), so all of
  // [40, 64) must change. Rows [16, 40) belong to the touched documents but see the same keys (causal): unchanged.
  const MaskCase m{"documents", true, 0, true};
  for (StrategyKind s : all_strategies())
    for (Sharding sh : {Sharding::zigzag, Sharding::doc_contiguous, Sharding::striped, Sharding::balanced}) {
      RunConfig a = masked(s, sh, 4, m), b = a;
      a.problem.seq = b.problem.seq = 64;
      a.problem.docs.lengths = {16, 24, 24};  // multiples of 2C = 8: per-document zigzag cuts them
      b.problem.docs.lengths = {16, 32, 16};
      INFO(strategy_name(s), " ", sharding_name(sh));
      const RunResult ra = run(a), rb = run(b);
      REQUIRE(ra.check.passed);
      REQUIRE(rb.check.passed);
      const Problem& p = a.problem;
      const std::int64_t row = p.heads * p.head_dim;  // out: [B=1, S, Nq, D]
      int changed_outside = 0, unchanged_inside = 0;
      for (std::int64_t pos = 0; pos < p.seq; ++pos) {
        double diff = 0;
        for (std::int64_t e = 0; e < row; ++e) {
          const auto i = static_cast<std::size_t>(pos * row + e);
          diff = std::max(diff, std::abs(ra.tensors.out[i] - rb.tensors.out[i]));
        }
        if (pos < 40 && diff > 1e-12) ++changed_outside;
        if (pos >= 40 && diff < 1e-6) ++unchanged_inside;
      }
      CHECK(changed_outside == 0);
      CHECK(unchanged_inside == 0);
    }
}
