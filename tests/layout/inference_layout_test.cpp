// Where an inference step's tokens live (sim/layout/inference_layout.cpp).
#include <doctest/doctest.h>

#include <vector>

#include "sim/layout/inference_layout.hpp"

using namespace cpsim;

namespace {
// Every position of [first, first + n) owned by exactly one rank.
void expect_partition(const std::vector<Positions>& shares, std::int64_t first, std::int64_t n) {
  std::vector<int> owners(static_cast<std::size_t>(n), 0);
  for (const Positions& s : shares)
    for (std::int64_t p : s) {
      REQUIRE(p >= first);
      REQUIRE(p < first + n);
      ++owners[static_cast<std::size_t>(p - first)];
    }
  for (int o : owners) CHECK(o == 1);
}
}  // namespace

TEST_CASE("zigzag_share gives rank r chunks r and 2C-1-r of the tokens, chunks differing by at most one token") {
  const Positions r0 = zigzag_share(100, 16, 4, 0), r3 = zigzag_share(100, 16, 4, 3);
  CHECK(r0 == Positions{100, 101, 114, 115});
  CHECK(r3 == Positions{106, 107, 108, 109});
  for (std::int64_t n : {0, 1, 5, 7, 37, 64})
    for (int C : {1, 2, 3, 8}) {
      std::vector<Positions> shares;
      std::int64_t lo = n, hi = 0;
      for (int r = 0; r < C; ++r) {
        shares.push_back(zigzag_share(10, n, C, r));
        lo = std::min(lo, shares.back().size());
        hi = std::max(hi, shares.back().size());
      }
      expect_partition(shares, 10, n);
      CHECK(hi - lo <= 2);
    }
}

TEST_CASE("a prefill's new tokens sit after the cache, zigzag over the new tokens alone") {
  const InferenceLayout L(4, 8, 40, NewTokenPlacement::zigzag);
  CHECK(L.new_positions(0) == Positions{40, 47});
  CHECK(L.new_positions(3) == Positions{43, 44});
  CHECK(L.cache_positions(0) == Positions{0, 1, 2, 3, 4, 35, 36, 37, 38, 39});
  CHECK(L.kv_positions(0) == Positions{0, 1, 2, 3, 4, 35, 36, 37, 38, 39, 40, 47});
  CHECK(L.max_new() == 2);
  CHECK(L.max_kv() == 12);
  std::vector<Positions> kv;
  for (int r = 0; r < 4; ++r) kv.push_back(L.kv_positions(r));
  expect_partition(kv, 0, 48);
}

TEST_CASE("decode's new tokens go round-robin, and one new token lives on rank 0 alone") {
  const InferenceLayout L(3, 5, 9, NewTokenPlacement::round_robin);
  CHECK(L.new_positions(0) == Positions{9, 12});
  CHECK(L.new_positions(1) == Positions{10, 13});
  CHECK(L.new_positions(2) == Positions{11});
  const InferenceLayout one(4, 1, 9, NewTokenPlacement::round_robin);
  CHECK(one.new_count(0) == 1);
  CHECK(one.new_count(3) == 0);
  CHECK(one.max_new() == 1);
}
