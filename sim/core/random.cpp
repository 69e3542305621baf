#include "sim/core/random.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numbers>

#include "sim/core/bf16.hpp"

namespace cpsim {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

namespace {

// hash3(seed, stream, index) = splitmix64(stream_key(seed, stream) ^ index): the keys are chained through splitmix64
// so that nearby (seed, stream, index) triples give unrelated bits; the first two links are the same for a whole
// tensor.
std::uint64_t stream_key(std::uint64_t seed, std::uint64_t stream) {
  return splitmix64(splitmix64(seed) ^ stream);
}

// The loops of rounded_normals vectorise on AVX2 (x86-64-v3) as on AVX-512 because the code below avoids two things
// only AVX-512 gives a vector form: converting a 64-bit integer to a double, and (in GCC) a select between two
// computed doubles, which it keeps as a branch without AVX-512's masked operations. Integers become doubles by their
// bits (small_double, exact_double), and values are chosen by selects of constants or by their bits. The values are
// the same.

// x as a double, exactly, for x < 2^52: 2^52 + x is the double whose bits are those of 2^52 with x in the mantissa,
// so the subtraction is exact.
[[gnu::always_inline]] inline double small_double(std::uint64_t x) {
  return std::bit_cast<double>(0x4330000000000000ULL | x) - 0x1.0p52;
}

// x as a double, exactly, for x <= 2^53 (x = 2^32 hi + lo): 2^84 + 2^32 hi likewise (2^84 with hi in the mantissa's
// upper part), and the sum of the two exact parts is exact.
[[gnu::always_inline]] inline double exact_double(std::uint64_t x) {
  const double hi = std::bit_cast<double>(0x4530000000000000ULL | (x >> 32)) - 0x1.0p84;
  return hi + small_double(x & 0xffffffffULL);
}

// The top 53 bits as an integer in [0, 2^53), shifted to (0, 2^53] and scaled: (0, 1].
[[gnu::always_inline]] inline double to_uniform(std::uint64_t bits) {
  return exact_double((bits >> 11) + 1) * 0x1.0p-53;
}

// The one formula of a sample (normal_at and the exact path of rounded_normals both call it).
double box_muller(double u1, double u2) {
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// c0 z^n + c1 z^(n-1) + ... + cn, by Horner's rule (unrolled at compile time).
template <class... C>
[[gnu::always_inline]] inline double horner(double z, double c0, C... rest) {
  double p = c0;
  ((p = p * z + rest), ...);
  return p;
}

// ln u for u in [2^-53, 1], relative error below 2^-48 (2^-51 measured), in straight-line code that vectorises:
//   u = 2^e m with m in [sqrt(1/2), sqrt(2)];  ln u = e ln 2 + 2 atanh(s),  s = (m - 1) / (m + 1), |s| <= 0.172
//   2 atanh(s) = 2 (s + s^3/3 + ... + s^19/19) + O(s^21 / 21), the rest below 2^-55 of the sum
//   ln 2 = ln2_hi + ln2_lo (fdlibm's split: e ln2_hi is exact for every e here)
// m - 1 is exact (Sterbenz), so s carries two roundings; e ln 2 and the series do not cancel (|e ln 2| >= 2 |2 atanh s|
// when e != 0).
[[gnu::always_inline]] inline double poly_log(double u) {
  constexpr std::uint64_t kFraction = 0x000fffffffffffffULL;
  const auto bits = std::bit_cast<std::uint64_t>(u);
  const auto fraction = static_cast<std::int64_t>(bits & kFraction);
  // 1.f > sqrt 2 exactly when f's bits are greater (one exponent); m = 1.f, or 1.f / 2 (its exponent one lower).
  const bool high = fraction > static_cast<std::int64_t>(std::bit_cast<std::uint64_t>(std::numbers::sqrt2) & kFraction);
  const double m = std::bit_cast<double>(static_cast<std::uint64_t>(fraction) |
                                         (high ? 0x3fe0000000000000ULL : 0x3ff0000000000000ULL));
  const double e = small_double(bits >> 52) - (high ? 1022.0 : 1023.0);  // the biased exponent, unbiased
  const double s = (m - 1.0) / (m + 1.0), z = s * s;
  const double p = horner(z, 2.0 / 19, 2.0 / 17, 2.0 / 15, 2.0 / 13, 2.0 / 11, 2.0 / 9, 2.0 / 7, 2.0 / 5, 2.0 / 3, 2.0);
  return e * 6.93147180369123816490e-01 + (s * p + e * 1.90821492927058770002e-10);
}

// cos x for x in (0, 2 pi], relative error below 2^-49 (2^-52 measured), in straight-line code that vectorises:
//   k = nearest integer to x / (pi/2) (0..4), y = x - k pi/2 in [-pi/4, pi/4] with pi/2 in three parts (fdlibm's
//   33 + 33 + 53 bits: k times each part is exact), so y keeps its relative accuracy even where cos x is near 0;
//   cos x = cos y, -sin y, -cos y, sin y for k mod 4 = 0, 1, 2, 3; cos y and sin y by Taylor series to y^18 and y^19
//   (the rest below 2^-60).
[[gnu::always_inline]] inline double poly_cos(double x) {
  const double shifted = x * (2.0 / std::numbers::pi) + 0x1.8p52;  // its low bits are k
  const double k = shifted - 0x1.8p52;
  const auto low = std::bit_cast<std::uint64_t>(shifted);  // k mod 4 in its two lowest bits
  const double y =
      ((x - k * 1.57079632673412561417e+00) - k * 6.07710050630396597660e-11) - k * 2.02226624871116645580e-21;
  const double z = y * y;
  // 1 - y^2/2! + ... + y^18/18!  and  y - y^3/3! + ... - y^19/19!
  const double c = 1.0 - z * horner(z, 1 / 6402373705728000.0, -1 / 20922789888000.0, 1 / 87178291200.0,
                                    -1 / 479001600.0, 1 / 3628800.0, -1 / 40320.0, 1 / 720.0, -1 / 24.0, 0.5);
  const double s = y + y * z * horner(z, -1 / 121645100408832000.0, 1 / 355687428096000.0, -1 / 1307674368000.0,
                                      1 / 6227020800.0, -1 / 39916800.0, 1 / 362880.0, -1 / 5040.0, 1 / 120.0,
                                      -1 / 6.0);
  // Chosen and negated by their bits: s where k is odd, c where it is even; the sign flipped where k mod 4 is 1 or 2,
  // which is where bit 1 of k + 1 is set.
  const std::uint64_t odd = 0 - (low & 1);
  const std::uint64_t sign = ((low + 1) & 2) << 62;
  return std::bit_cast<double>(((std::bit_cast<std::uint64_t>(s) & odd) | (std::bit_cast<std::uint64_t>(c) & ~odd)) ^
                               sign);
}

// How far the approximation a may be from libm's value x, relative: the two polynomials' errors (above), libm's log
// and cos within 1 ulp (the glibc manual's table for x86-64), and the roundings of both formulas sum to below 2^-47;
// the test below allows 2^-42 (a factor of 32).
//
// x and a round alike unless a tie of the rounding (a point halfway between two neighbouring f32 values) lies
// between them. For a in [2^e, 2^(e+1)), |x - a| < 2^-42 |a| < 2^(e-41), which is 2^11 of a's ulps (2^(e-52)); a
// tie of f32 rounding in a's binade is the double whose lowest 29 mantissa bits are 2^28 (the ties nearest a binade's
// edge are 2^27 ulps or more inside it). So where a's lowest 29 bits are 2^11 or more from 2^28, no tie is within
// reach and x rounds as a does. bf16 rounding goes through f32 (bf16.hpp), so it changes only where f32's does: the
// same test holds for it. a = 0 is the sample 0 (u1 = 1), whose sign is cos's: it takes the exact path too.
[[gnu::always_inline]] inline bool near_f32_tie(double a) {
  const auto bits = std::bit_cast<std::uint64_t>(a);
  const std::int64_t from_tie =
      static_cast<std::int64_t>(bits & ((std::uint64_t{1} << 29) - 1)) - (std::int64_t{1} << 28);
  constexpr std::int64_t kReach = std::int64_t{1} << 11;
  const bool zero = (bits << 1) == 0;  // computed apart: GCC vectorises no loop around a || that short-circuits it
  return (from_tie < kReach && from_tie > -kReach) || zero;
}

// round_to_dtype for f32 and bf16, inline so that the loops vectorise.
template <DType T>
double round_to(double x) {
  if constexpr (T == DType::f32) return static_cast<float>(x);
  return round_to_bf16(x);
}

// The uniform of stream index i, its stream's key given (hash3 above).
[[gnu::always_inline]] inline double uniform(std::uint64_t key, std::uint64_t i) {
  return to_uniform(splitmix64(key ^ i));
}

constexpr std::size_t kBlock = 256;

// out[i] = round_to<T>(box_muller(u1, u2)) of samples i in [0, n), n <= kBlock, whose uniforms are stream indices
// base + 2i and base + 2i + 1. One loop that vectorises makes the uniforms, the approximation, its rounding and the
// tie test (nothing stored between them); the rare samples near a tie (about 8 in a million) are then made again by
// box_muller itself.
template <DType T>
void round_block(std::uint64_t key, std::uint64_t base, std::size_t n, double* out) {
  bool exact[kBlock];
  int near = 0;  // an int, not a bool: GCC vectorises this reduction
  for (std::size_t i = 0; i < n; ++i) {
    const double u1 = uniform(key, base + 2 * i), u2 = uniform(key, base + 2 * i + 1);
    const double a = std::sqrt(-2.0 * poly_log(u1)) * poly_cos(2.0 * std::numbers::pi * u2);
    out[i] = round_to<T>(a);
    exact[i] = near_f32_tie(a);
    near += exact[i];
  }
  if (near == 0) return;
  for (std::size_t i = 0; i < n; ++i)
    if (exact[i]) out[i] = round_to<T>(box_muller(uniform(key, base + 2 * i), uniform(key, base + 2 * i + 1)));
}

}  // namespace

double uniform_at(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  return uniform(stream_key(seed, stream), index);
}

double normal_at(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  return box_muller(uniform_at(seed, stream, 2 * index), uniform_at(seed, stream, 2 * index + 1));
}

std::vector<double> normals(std::uint64_t seed, std::uint64_t stream, std::size_t count, std::uint64_t first) {
  std::vector<double> out(count);
  rounded_normals(seed, stream, first, count, DType::f64, out.data());
  return out;
}

void rounded_normals(std::uint64_t seed, std::uint64_t stream, std::uint64_t first, std::size_t count, DType t,
                     double* out) {
  const std::uint64_t key = stream_key(seed, stream);
  for (std::size_t at = 0; at < count; at += kBlock) {
    const std::size_t n = std::min(kBlock, count - at);
    const std::uint64_t base = 2 * (first + at);  // sample first + at + i: uniforms base + 2i and base + 2i + 1
    double* o = out + at;
    switch (t) {
      case DType::f32:
        round_block<DType::f32>(key, base, n, o);
        break;
      case DType::bf16:
        round_block<DType::bf16>(key, base, n, o);
        break;
      case DType::f64:
      case DType::i64: {
        // libm for every sample (the rounding to f64 is the sample itself); the uniforms first, in a loop of their
        // own that vectorises (in the loop that calls libm they would not).
        double u1[kBlock], u2[kBlock];
        for (std::size_t i = 0; i < n; ++i) {
          u1[i] = uniform(key, base + 2 * i);
          u2[i] = uniform(key, base + 2 * i + 1);
        }
        for (std::size_t i = 0; i < n; ++i) o[i] = box_muller(u1[i], u2[i]);
        break;
      }
    }
  }
}

}  // namespace cpsim
