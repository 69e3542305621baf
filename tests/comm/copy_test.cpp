// The transports' copy (sim/comm/copy.hpp): every byte lands, whatever the alignment, and nothing beside it.
#include "sim/comm/copy.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "sim/os/host_cache.hpp"

using namespace cpsim;

namespace {

// Copies n bytes from source offset `from_at` to destination offset `to_at` with `copy`, between guard bytes,
// and checks the destination holds the source's bytes and the guards are untouched.
template <class Copy>
void check_copy(Copy copy, std::size_t n, std::size_t from_at, std::size_t to_at) {
  constexpr std::size_t kGuard = 64;
  std::vector<std::uint8_t> src(n + 128), dst(n + 128 + 2 * kGuard, 0xA5);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 131 + 7);
  std::uint8_t* to = dst.data() + kGuard + to_at;
  copy(to, src.data() + from_at, n);
  CAPTURE(n);
  CAPTURE(from_at);
  CAPTURE(to_at);
  CHECK(std::memcmp(to, src.data() + from_at, n) == 0);
  bool guards = true;
  for (std::uint8_t* p = dst.data(); p < to; ++p) guards = guards && *p == 0xA5;
  for (std::uint8_t* p = to + n; p < dst.data() + dst.size(); ++p) guards = guards && *p == 0xA5;
  CHECK(guards);
}

}  // namespace

TEST_CASE("a streaming copy lands every byte and nothing beside them, whatever the alignment and length") {
  // Lengths around a line (64), a page (4096) and four pages; offsets that misalign either side.
  for (std::size_t n :
       {std::size_t{0}, std::size_t{1}, std::size_t{63}, std::size_t{64}, std::size_t{65}, std::size_t{4095},
        std::size_t{16383}, std::size_t{16384}, std::size_t{16385}, std::size_t{3 * 16384 + 4097}})
    for (std::size_t from_at : {0, 1, 17, 64})
      for (std::size_t to_at : {0, 5, 33, 63}) check_copy(stream_copy, n, from_at, to_at);
}

TEST_CASE("copy_bytes lands every byte on both sides of the streaming threshold, alone or as part of a larger call") {
  const RanksCopying many(1 << 20);  // the threshold's floor, 1 MiB: small buffers
  const std::size_t t = stream_threshold();
  auto alone = [](void* to, const void* from, std::size_t n) { copy_bytes(to, from, n); };
  for (std::size_t n : {t - 1, t, t + 1, t + 4096 + 3}) check_copy(alone, n, 3, 29);
  // A copy below the threshold whose call lands more than it in all streams (all_to_all's chunks).
  auto part = [t](void* to, const void* from, std::size_t n) { copy_bytes(to, from, n, t); };
  for (std::size_t n : {std::size_t{1000}, t / 4 + 5}) check_copy(part, n, 7, 1);
}

TEST_CASE("copy_bytes lands every byte where the destination lies a few bytes past the source modulo 4 KiB") {
  // One buffer, so that the gap between source and destination is chosen: 1..31 bytes past the source modulo
  // 4 KiB (where copy_bytes copies by lines, not memcpy), and 0, 32 and 4095 beside that window.
  constexpr std::size_t kGuard = 64, kPage = 4096;
  for (std::size_t gap :
       {std::size_t{1}, std::size_t{16}, std::size_t{31}, std::size_t{0}, std::size_t{32}, std::size_t{4095}})
    for (std::size_t n : {std::size_t{2047}, std::size_t{2048}, std::size_t{4096 + 63}, std::size_t{65536 + 5}}) {
      std::vector<std::uint8_t> buf(2 * kGuard + 2 * n + 3 * kPage, 0xA5);
      std::uint8_t* from = buf.data() + kGuard;
      // The destination starts past the source's end, on the chosen page offset relative to the source.
      const std::size_t past = (n + kPage - 1) / kPage * kPage + kPage;
      std::uint8_t* to = from + past + gap;
      for (std::size_t i = 0; i < n; ++i) from[i] = static_cast<std::uint8_t>(i * 131 + 7);
      CAPTURE(gap);
      CAPTURE(n);
      REQUIRE((static_cast<std::size_t>(to - from) % kPage) == gap);
      copy_bytes(to, from, n);
      CHECK(std::memcmp(to, from, n) == 0);
      bool guards = true;
      for (std::uint8_t* p = from + n; p < to; ++p) guards = guards && *p == 0xA5;
      for (std::uint8_t* p = to + n; p < buf.data() + buf.size(); ++p) guards = guards && *p == 0xA5;
      CHECK(guards);
    }
}

TEST_CASE("a line copy lands every byte and nothing beside them, whatever the alignment and length") {
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{63}, std::size_t{64}, std::size_t{65},
                        std::size_t{4095}, std::size_t{16385}})
    for (std::size_t from_at : {0, 1, 17, 64})
      for (std::size_t to_at : {0, 5, 33, 63}) check_copy(line_copy, n, from_at, to_at);
}

TEST_CASE("the streaming threshold is each rank's share of the last-level cache, and 1 MiB at the least") {
  constexpr std::size_t kFloor = std::size_t{1} << 20;
  const std::size_t whole = stream_threshold(1);
  CHECK(whole >= kFloor);
  const std::size_t llc = last_level_cache_bytes().value_or(std::size_t{32} << 20);
  CHECK(whole == std::max(kFloor, llc));
  for (int ranks : {2, 3, 4, 8, 64, 1 << 20}) {
    CAPTURE(ranks);
    CHECK(stream_threshold(ranks) == std::max(kFloor, whole / static_cast<std::size_t>(ranks)));
  }
  CHECK(stream_threshold(1 << 20) == kFloor);
  CHECK(stream_threshold(0) == whole);  // no ranks counts as one
}

TEST_CASE("copies count the ranks of the launch under way, and the count before comes back after it") {
  const std::size_t outside = stream_threshold();
  CHECK(outside == stream_threshold(1));
  {
    const RanksCopying four(4);
    CHECK(stream_threshold() == stream_threshold(4));
    {
      const RanksCopying two(2);
      CHECK(stream_threshold() == stream_threshold(2));
    }
    CHECK(stream_threshold() == stream_threshold(4));
  }
  CHECK(stream_threshold() == outside);
}
