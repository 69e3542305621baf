// Positions as runs: every query on the runs equals the same query on the expanded list.
#include "sim/core/positions.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <random>

#include "sim/core/error.hpp"

using namespace cpsim;

TEST_CASE("the layouts' positions are a few runs whatever S is") {
  // zigzag C=4, rank 1 of S=16: [2,4) [12,14); striped C=4 rank 1; a hybrid group of 2 striped ranks.
  Positions z;
  z.append(PosRun{2, 2, 1, 1});
  z.append(PosRun{12, 2, 1, 1});
  CHECK(z.runs().size() == 2);
  CHECK(z.expand() == std::vector<std::int64_t>{2, 3, 12, 13});
  const Positions striped = [] {
    Positions p;
    p.append(PosRun{1, std::int64_t{1} << 40, 4, 1});
    return p;
  }();
  CHECK(striped.runs().size() == 1);
  CHECK(striped.size() == std::int64_t{1} << 40);
  CHECK(striped.at(3) == 13);
  CHECK(striped.back() == 1 + ((std::int64_t{1} << 40) - 1) * 4);
  Positions blocks;
  blocks.append(PosRun{2, 8, 4, 2});
  CHECK(blocks.expand() == std::vector<std::int64_t>{2, 3, 6, 7, 10, 11, 14, 15});
  CHECK(Positions{0, 1, 2, 3} == Positions::range(0, 4));
  CHECK(Positions{0, 1, 2, 3}.runs().size() == 1);
  CHECK(Positions{1, 5, 9}.runs().size() == 1);
}

TEST_CASE("at, lower_bound, slice and spans agree with the expanded list on random runs") {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    Positions p;
    std::int64_t at = static_cast<std::int64_t>(rng() % 3);
    for (int r = 0, n = 1 + static_cast<int>(rng() % 4); r < n; ++r) {
      const std::int64_t width = 1 + static_cast<std::int64_t>(rng() % 3);
      const std::int64_t stride = rng() % 2 ? 1 : width + static_cast<std::int64_t>(rng() % 3);
      const std::int64_t count =
          stride == 1 ? 1 + static_cast<std::int64_t>(rng() % 6) : width * (1 + static_cast<std::int64_t>(rng() % 4));
      const PosRun run{at, count, stride, stride == 1 ? 1 : width};
      p.append(run);
      at = run.last() + 1 + static_cast<std::int64_t>(rng() % 3);
    }
    const std::vector<std::int64_t> v = p.expand();
    CAPTURE(p.text());
    REQUIRE(p.size() == static_cast<std::int64_t>(v.size()));
    CHECK(std::vector<std::int64_t>(p.begin(), p.end()) == v);
    for (std::int64_t i = 0; i < p.size(); ++i) CHECK(p.at(i) == v[static_cast<std::size_t>(i)]);
    for (std::int64_t x = -1; x <= v.back() + 1; ++x) {
      CHECK(p.lower_bound(x) == std::lower_bound(v.begin(), v.end(), x) - v.begin());
      CHECK(p.upper_bound(x) == std::upper_bound(v.begin(), v.end(), x) - v.begin());
    }
    for (std::int64_t a = 0; a <= p.size(); ++a)
      for (std::int64_t n = 0; a + n <= p.size(); ++n)
        CHECK(p.slice(a, n).expand() == std::vector<std::int64_t>(v.begin() + a, v.begin() + a + n));
    std::int64_t covered = 0;
    for (const Span& s : p.spans()) {
      for (std::int64_t x = s.lo; x < s.hi; ++x) CHECK(std::binary_search(v.begin(), v.end(), x));
      covered += s.hi - s.lo;
    }
    CHECK(covered == p.size());
  }
}

TEST_CASE("positions that do not ascend and malformed runs are refused") {
  Positions p = Positions::range(0, 4);
  CHECK_THROWS_WITH_AS(p.append(PosRun{3, 1, 1, 1}), doctest::Contains("ascending"), Error);
  CHECK_THROWS_AS(p.append(PosRun{10, 3, 4, 2}), Error);  // 3 positions in blocks of 2
  CHECK_THROWS_AS(p.append(PosRun{10, 4, 1, 2}), Error);  // blocks overlap
  CHECK_THROWS_AS(p.at(4), Error);
  CHECK_THROWS_AS(p.slice(2, 3), Error);
}
