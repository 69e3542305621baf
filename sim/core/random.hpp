// Deterministic normal samples addressed by (seed, stream, index): any shard of a tensor can be generated on its own,
// on any rank or process, and equals the same rows of the whole tensor generated at once.
//
//   normal_at(seed, stream, i) = sqrt(-2 ln u1) * cos(2 pi u2)          (Box-Muller)
//   u1 = uniform(h(seed, stream, 2i)), u2 = uniform(h(seed, stream, 2i + 1)), h = splitmix64 of the three keys
// Streams separate tensors of one run (q = 0, k = 1, v = 2, dout = 3, say).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace cpsim {

// One step of splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", 2014).
std::uint64_t splitmix64(std::uint64_t x);

// A uniform sample in (0, 1]: never 0, so log(u) is finite.
double uniform_at(std::uint64_t seed, std::uint64_t stream, std::uint64_t index);

// A standard normal sample.
double normal_at(std::uint64_t seed, std::uint64_t stream, std::uint64_t index);

// normal_at(seed, stream, first + i) for i in [0, count).
std::vector<double> normals(std::uint64_t seed, std::uint64_t stream, std::size_t count, std::uint64_t first = 0);

}  // namespace cpsim
