#include "sim/core/random.hpp"

#include <cmath>
#include <numbers>

namespace cpsim {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

namespace {
// Chains the keys through splitmix64 so that nearby (seed, stream, index) triples give unrelated bits.
std::uint64_t hash3(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  return splitmix64(splitmix64(splitmix64(seed) ^ stream) ^ index);
}
}  // namespace

double uniform_at(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  // The top 53 bits as an integer in [0, 2^53), shifted to (0, 2^53] and scaled: (0, 1].
  const std::uint64_t bits = hash3(seed, stream, index) >> 11;
  return static_cast<double>(bits + 1) * 0x1.0p-53;
}

double normal_at(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  const double u1 = uniform_at(seed, stream, 2 * index);
  const double u2 = uniform_at(seed, stream, 2 * index + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

std::vector<double> normals(std::uint64_t seed, std::uint64_t stream, std::size_t count, std::uint64_t first) {
  std::vector<double> out(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = normal_at(seed, stream, first + i);
  return out;
}

}  // namespace cpsim
