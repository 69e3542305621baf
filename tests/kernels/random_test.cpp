// The counter-based normal generator: the same sample for the same (seed, stream, index), everywhere.
#include "sim/core/random.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace cpsim;

TEST_CASE("a sample depends only on its seed, stream and index, so a shard equals the same slice of the whole") {
  const auto whole = normals(7, 2, 1000);
  const auto shard = normals(7, 2, 100, 450);  // rows 450..549 generated on their own
  for (std::size_t i = 0; i < shard.size(); ++i) CHECK(shard[i] == whole[450 + i]);
  CHECK(normal_at(7, 2, 999) == whole[999]);
  CHECK(normals(7, 2, 1000) == whole);
}

TEST_CASE("different seeds, streams and indices give different samples") {
  CHECK(normal_at(1, 0, 0) != normal_at(2, 0, 0));
  CHECK(normal_at(1, 0, 0) != normal_at(1, 1, 0));
  CHECK(normal_at(1, 0, 0) != normal_at(1, 0, 1));
  CHECK(splitmix64(0) != splitmix64(1));
}

TEST_CASE("uniform samples lie in (0, 1] and normal samples are finite") {
  for (std::uint64_t i = 0; i < 10000; ++i) {
    const double u = uniform_at(3, 0, i);
    REQUIRE(u > 0.0);
    REQUIRE(u <= 1.0);
    REQUIRE(std::isfinite(normal_at(3, 0, i)));
  }
}

TEST_CASE("200000 normal samples have mean 0 and variance 1 within five standard errors") {
  const std::size_t n = 200000;
  const auto x = normals(42, 0, n);
  double sum = 0, sq = 0;
  for (double v : x) sum += v;
  const double mean = sum / n;
  for (double v : x) sq += (v - mean) * (v - mean);
  const double var = sq / (n - 1);
  // standard errors: mean 1/sqrt(n); variance sqrt(2/n) for a normal
  CHECK(std::abs(mean) < 5.0 / std::sqrt(double(n)));
  CHECK(std::abs(var - 1.0) < 5.0 * std::sqrt(2.0 / n));
  std::size_t beyond2 = 0;  // P(|z| > 2) = 0.0455
  for (double v : x) beyond2 += std::abs(v) > 2.0;
  CHECK(std::abs(double(beyond2) / n - 0.0455) < 0.003);
}
