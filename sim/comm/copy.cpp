#include "sim/comm/copy.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

namespace cpsim {

namespace {

// The sanitizers do not see a streaming store's bytes (GCC's builtin is not instrumented), so their builds copy
// with memcpy, which they check exactly.
#if defined(__SSE2__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
constexpr bool kStreams = true;
#else
constexpr bool kStreams = false;
#endif

constexpr std::size_t kLine = 64, kPage = 4096, kBlock = 4 * kPage, kAhead = 4 * kLine;

#if defined(__SSE2__)
// One 64-byte line: four unaligned 16-byte loads, four streaming stores to the aligned destination (the line is
// written whole, never read).
inline void stream_line(std::byte* to, const std::byte* from) {
  const auto* src = reinterpret_cast<const __m128i*>(from);
  auto* dst = reinterpret_cast<__m128i*>(to);
  const __m128i a = _mm_loadu_si128(src), b = _mm_loadu_si128(src + 1), c = _mm_loadu_si128(src + 2),
                e = _mm_loadu_si128(src + 3);
  _mm_stream_si128(dst, a);
  _mm_stream_si128(dst + 1, b);
  _mm_stream_si128(dst + 2, c);
  _mm_stream_si128(dst + 3, e);
}
#endif

}  // namespace

std::size_t stream_threshold() {
  static const std::size_t threshold = [] {
    constexpr std::size_t kLow = std::size_t{256} << 10, kHigh = std::size_t{4} << 20, kUnknown = std::size_t{1} << 20;
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return l2 > 0 ? std::clamp(static_cast<std::size_t>(l2) / 2, kLow, kHigh) : kUnknown;
  }();
  return threshold;
}

void copy_bytes(void* to, const void* from, std::size_t n, std::size_t call_bytes) {
  if (std::max(n, call_bytes) < stream_threshold())
    std::memcpy(to, from, n);
  else
    stream_copy(to, from, n);
}

void stream_copy(void* to, const void* from, std::size_t n) {
  if constexpr (!kStreams) {
    std::memcpy(to, from, n);
  } else {
#if defined(__SSE2__)
    auto* d = static_cast<std::byte*>(to);
    const auto* s = static_cast<const std::byte*>(from);
    // 1. Up to the destination's first whole line, with memcpy.
    const std::size_t head = std::min(n, (kLine - reinterpret_cast<std::uintptr_t>(d) % kLine) % kLine);
    std::memcpy(d, s, head);
    std::size_t i = head;
    // 2. Blocks of four pages, a line of each page in turn: four streams for the memory to serve at once, each
    //    source prefetched four lines ahead (glibc's large copies interleave four pages the same way).
    for (; i + kBlock <= n; i += kBlock) {
      for (std::size_t at = 0; at < kPage; at += kLine) {
        for (std::size_t p = 0; p < kBlock; p += kPage) {
          _mm_prefetch(reinterpret_cast<const char*>(s + i + p + at + kAhead), _MM_HINT_T0);
          stream_line(d + i + p + at, s + i + p + at);
        }
      }
    }
    // 3. The whole lines left, then the last part line with memcpy; 4. the fence.
    for (; i + kLine <= n; i += kLine) stream_line(d + i, s + i);
    std::memcpy(d + i, s + i, n - i);
    _mm_sfence();
#endif
  }
}

}  // namespace cpsim
