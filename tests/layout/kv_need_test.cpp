// The need: which K/V rows each rank's queries see of every other rank, against a count made pair by pair.
#include "sim/layout/kv_need.hpp"

#include <doctest/doctest.h>

#include <set>

#include "sim/layout/documents.hpp"

using namespace cpsim;

namespace {

// The rows of owner o that some query of rank r sees, found by trying every (query, key) pair.
std::set<std::int64_t> brute_rows(const SeqLayout& L, int r, int o, const Mask& m) {
  std::set<std::int64_t> rows;
  const std::vector<std::int64_t> q = L.positions(r).expand(), k = L.positions(o).expand();
  for (std::size_t j = 0; j < k.size(); ++j)
    for (std::int64_t p : q)
      if (m.visible(p, k[j])) {
        rows.insert(static_cast<std::int64_t>(j));
        break;
      }
  return rows;
}

struct MaskCase {
  bool causal;
  std::int64_t window;
  bool docs;
};
constexpr MaskCase kMasks[] = {{true, 0, false}, {false, 0, false}, {true, 0, true},  {true, 5, false},
                               {false, 6, false}, {true, 3, true},  {false, 0, true}, {false, 4, true}};

}  // namespace

TEST_CASE("the rows a rank needs of every owner are exactly those some query of it sees, every mask and sharding") {
  for (int C : {2, 3, 4, 8})
    for (const MaskCase& mc : kMasks)
      for (Sharding sh : all_shardings()) {
        const std::int64_t u = 2 * C, S = 10 * u;
        LayoutOptions opt;
        if (mc.docs) {
          DocSpec spec;
          spec.lengths = {4 * u, 2 * u, 3 * u, u};  // multiples of 2C: per-document zigzag cuts them
          opt.docs = resolve_documents(spec, S, C);
        }
        opt.mask = make_mask(mc.causal, mc.window, opt.docs);
        const SeqLayout L(C, S, sh, opt);
        for (int r = 0; r < C; ++r)
          for (int o = 0; o < C; ++o) {
            CAPTURE(C);
            CAPTURE(sharding_name(sh));
            CAPTURE(opt.mask.describe());
            CAPTURE(r);
            CAPTURE(o);
            const NeededRows n = needed_rows(L, r, o, opt.mask);
            std::set<std::int64_t> got;
            for (const Span& s : n.rows)
              for (std::int64_t i = s.lo; i < s.hi; ++i) got.insert(i);
            CHECK(got == brute_rows(L, r, o, opt.mask));
            CHECK(n.count == static_cast<std::int64_t>(got.size()));
            CHECK(n.positions.size() == n.count);
          }
      }
}

TEST_CASE("causal zigzag: a rank needs half of every earlier rank's rows and all of every later rank's") {
  for (int C : {2, 4, 8}) {
    const SeqLayout L(C, 8 * C, Sharding::zigzag);  // t = 4 rows per chunk, 8 per rank
    for (int r = 0; r < C; ++r) {
      const std::vector<std::int64_t> rows = needed_counts(L, r, Mask(true));
      for (int o = 0; o < C; ++o) CHECK(rows[static_cast<std::size_t>(o)] == (o == r ? 0 : o < r ? 4 : 8));
      CHECK(needed_total(L, r, Mask(true)) == 4 * r + 8 * (C - 1 - r));
    }
  }
}

TEST_CASE("a window no longer than a chunk: a zigzag rank needs only its two neighbours, contiguous only the one before") {
  const int C = 4;
  const Mask w(true, 4, {});
  const SeqLayout Z(C, 32, Sharding::zigzag), K(C, 32, Sharding::contiguous);  // chunks of 4, ranks of 8 rows
  for (int r = 0; r < C; ++r) {
    const std::vector<std::int64_t> z = needed_counts(Z, r, w), k = needed_counts(K, r, w);
    for (int o = 0; o < C; ++o) {
      const bool neighbour = o == r - 1 || o == r + 1;
      CHECK((z[static_cast<std::size_t>(o)] > 0) == neighbour);
      CHECK((k[static_cast<std::size_t>(o)] > 0) == (o == r - 1));
      CHECK(k[static_cast<std::size_t>(o)] <= 3);  // the window's 3 keys before the rank's first row
    }
  }
}
