#include "sim/comm/copy.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

#include "sim/os/host_cache.hpp"

namespace cpsim {

namespace {

// The sanitizers do not see a streaming store's bytes (GCC's builtin is not instrumented), so their builds copy
// with memcpy, which they check exactly, in place of both loops below.
#if defined(__SSE2__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
constexpr bool kOwnLoops = true;
#else
constexpr bool kOwnLoops = false;
#endif

constexpr std::size_t kLine = 64, kAhead = 4 * kLine, kPage = 4096;

// glibc's memcpy copies with `rep movsb` from 2 KiB (glibc.cpu.x86_rep_movsb_threshold) up. On an AMD Zen 3 core
// that ran at 1.6-2.8 GB/s, against 33-46 GB/s, whenever the destination lay 1 to 31 bytes past the source modulo
// 4 KiB: slow at 8, 16 and 24 bytes for every source alignment scanned, fast at 0 and from 32
// (scripts/copy_distance_scan.cpp; docs/performance/comm.md, "memcpy that stalls"). A vector loop does not stall.
constexpr std::size_t kMovsbFrom = 2048, kAliasGap = 32;

bool movsb_would_stall(const void* to, const void* from, std::size_t n) {
  const std::size_t gap = (reinterpret_cast<std::uintptr_t>(to) - reinterpret_cast<std::uintptr_t>(from)) % kPage;
  return n >= kMovsbFrom && gap > 0 && gap < kAliasGap;
}

#if defined(__SSE2__)
// One 64-byte line: four unaligned 16-byte loads, then four stores: cached and unaligned, or (Stream) streaming, to
// an aligned destination (the line is written whole, never read).
template <bool Stream>
inline void move_line(std::byte* to, const std::byte* from) {
  const auto* src = reinterpret_cast<const __m128i*>(from);
  auto* dst = reinterpret_cast<__m128i*>(to);
  const __m128i v[4] = {_mm_loadu_si128(src), _mm_loadu_si128(src + 1), _mm_loadu_si128(src + 2),
                        _mm_loadu_si128(src + 3)};
  for (int k = 0; k < 4; ++k) {
    if constexpr (Stream)
      _mm_stream_si128(dst + k, v[k]);
    else
      _mm_storeu_si128(dst + k, v[k]);
  }
}
#endif

// The vector loops of line_copy and (Stream) stream_copy.
template <bool Stream>
void copy_lines(void* to, const void* from, std::size_t n) {
  if constexpr (!kOwnLoops) {
    std::memcpy(to, from, n);
  } else {
#if defined(__SSE2__)
    auto* d = static_cast<std::byte*>(to);
    const auto* s = static_cast<const std::byte*>(from);
    // 1. Up to the destination's first whole line, with memcpy (under 64 bytes: never `rep movsb`).
    const std::size_t head = std::min(n, (kLine - reinterpret_cast<std::uintptr_t>(d) % kLine) % kLine);
    std::memcpy(d, s, head);
    std::size_t i = head;
    // 2. The whole lines, in order: one stream. Streaming, each source line is prefetched four lines ahead.
    //    Interleaving four pages (as glibc's largest copies do) made the backends' large messages 4-8 x slower on
    //    an AMD Zen 3 machine than one stream (docs/performance/comm.md, "Streaming copies").
    for (; i + kLine <= n; i += kLine) {
      if constexpr (Stream) _mm_prefetch(reinterpret_cast<const char*>(s + i + kAhead), _MM_HINT_T0);
      move_line<Stream>(d + i, s + i);
    }
    // 3. The last part line with memcpy; 4. streaming, the fence.
    std::memcpy(d + i, s + i, n - i);
    if constexpr (Stream) _mm_sfence();
#endif
  }
}

// The threshold of the launch under way (RanksCopying), worked out once per launch; 0 outside one.
std::atomic<std::size_t> launch_threshold{0};

// The machine's last-level cache (sim/os/host_cache.hpp), 32 MiB where it is not known.
std::size_t last_level_cache() {
  static const std::size_t bytes = last_level_cache_bytes().value_or(std::size_t{32} << 20);
  return bytes;
}

}  // namespace

std::size_t stream_threshold(int ranks) {
  constexpr std::size_t kFloor = std::size_t{1} << 20;
  return std::max(kFloor, last_level_cache() / static_cast<std::size_t>(std::max(ranks, 1)));
}

std::size_t stream_threshold() {
  const std::size_t t = launch_threshold.load(std::memory_order_relaxed);
  return t > 0 ? t : stream_threshold(1);
}

RanksCopying::RanksCopying(int ranks) : before_(launch_threshold.exchange(stream_threshold(ranks))) {}

RanksCopying::~RanksCopying() {
  launch_threshold.store(before_);
}

void copy_bytes(void* to, const void* from, std::size_t n, std::size_t call_bytes) {
  if (std::max(n, call_bytes) >= stream_threshold())
    stream_copy(to, from, n);
  else if (movsb_would_stall(to, from, n))
    line_copy(to, from, n);
  else
    std::memcpy(to, from, n);
}

void line_copy(void* to, const void* from, std::size_t n) {
  copy_lines<false>(to, from, n);
}

void stream_copy(void* to, const void* from, std::size_t n) {
  copy_lines<true>(to, from, n);
}

}  // namespace cpsim
