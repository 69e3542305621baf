// Eigen, included once for sim/kernels (and its tests and benchmarks).
// GCC 12 reports a false -Wmaybe-uninitialized inside its own AVX-512 intrinsics (the deliberately undefined operand
// of _mm512_undefined_pd; GCC bug 105593) when Eigen's matrix products are inlined with -march=native. The warning is
// silenced for the lines of these headers only.
#pragma once
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <Eigen/Core>
#pragma GCC diagnostic pop
#else
#include <Eigen/Core>
#endif
