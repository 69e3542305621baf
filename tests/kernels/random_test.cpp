// The counter-based normal generator: the same sample for the same (seed, stream, index), everywhere.
#include "sim/core/random.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

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

namespace {

// Where rounded_normals differs from round_to_dtype(normal_at(...)), bit for bit, over n samples from `first`.
std::size_t differences(std::uint64_t seed, std::uint64_t stream, std::uint64_t first, std::size_t n, DType t) {
  std::vector<double> fast(n);
  rounded_normals(seed, stream, first, n, t, fast.data());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double want = round_to_dtype(normal_at(seed, stream, first + i), t);
    bad += std::memcmp(&fast[i], &want, sizeof want) != 0;
  }
  return bad;
}

}  // namespace

TEST_CASE("rounded_normals gives normal_at's values rounded to the dtype, bit for bit, at any offset and length") {
  for (DType t : {DType::f32, DType::bf16, DType::f64}) {
    CAPTURE(dtype_name(t));
    CHECK(differences(1, 0, 0, 300000, t) == 0);
    CHECK(differences(7, 3, 123457, 1001, t) == 0);  // an odd start and a partial block
    CHECK(differences(0, 0, (std::uint64_t{1} << 40) + 5, 777, t) == 0);
    CHECK(differences(42, 1, 0, 1, t) == 0);
    CHECK(differences(42, 1, 0, 0, t) == 0);
  }
  CHECK(normals(7, 2, 10, 5) == std::vector<double>{normal_at(7, 2, 5), normal_at(7, 2, 6), normal_at(7, 2, 7),
                                                    normal_at(7, 2, 8), normal_at(7, 2, 9), normal_at(7, 2, 10),
                                                    normal_at(7, 2, 11), normal_at(7, 2, 12), normal_at(7, 2, 13),
                                                    normal_at(7, 2, 14)});
}

TEST_SUITE("slow") {
  TEST_CASE("rounded_normals matches normal_at bit for bit over 8 million f32 samples and 2 million bf16") {
    for (std::uint64_t stream = 0; stream < 4; ++stream) CHECK(differences(1, stream, 0, 2 << 20, DType::f32) == 0);
    CHECK(differences(99, 0, 0, 2 << 20, DType::bf16) == 0);
  }
}
