// Deterministic normal samples addressed by (seed, stream, index): any shard of a tensor can be generated on its own,
// on any rank or process, and equals the same rows of the whole tensor generated at once.
//
//   normal_at(seed, stream, i) = sqrt(-2 ln u1) * cos(2 pi u2)          (Box-Muller, libm's log and cos)
//   u1 = uniform(h(seed, stream, 2i)), u2 = uniform(h(seed, stream, 2i + 1)), h = splitmix64 of the three keys
// Streams separate tensors of one run (q = 0, k = 1, v = 2, dout = 3, say).
//
// rounded_normals makes the same values, rounded to a dtype, many at a time and fast (docs/architecture.md#the-inputs):
// blocks of samples go through one loop that vectorises on AVX2 and AVX-512 (the hash; log and cos as polynomials,
// error below 2^-46 of the sample), and a sample is rounded to f32 or bf16 from that approximation wherever no tie of
// the rounding lies within 2^-42 of it, so that libm's value, as close, rounds alike; the rest (about 8 in a
// million), and every f64 sample, are computed by normal_at itself. So the values are normal_at's, bit for bit.
// `cpsim bench inputs` times both and compares them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/core/dtype.hpp"

namespace cpsim {

// One step of splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", 2014).
std::uint64_t splitmix64(std::uint64_t x);

// A uniform sample in (0, 1]: never 0, so log(u) is finite.
double uniform_at(std::uint64_t seed, std::uint64_t stream, std::uint64_t index);

// A standard normal sample.
double normal_at(std::uint64_t seed, std::uint64_t stream, std::uint64_t index);

// normal_at(seed, stream, first + i) for i in [0, count).
std::vector<double> normals(std::uint64_t seed, std::uint64_t stream, std::size_t count, std::uint64_t first = 0);

// out[i] = round_to_dtype(normal_at(seed, stream, first + i), t) for i in [0, count), bit for bit.
void rounded_normals(std::uint64_t seed, std::uint64_t stream, std::uint64_t first, std::size_t count, DType t,
                     double* out);

}  // namespace cpsim
