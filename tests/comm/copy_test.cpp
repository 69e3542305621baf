// The transports' copy (sim/comm/copy.hpp): every byte lands, whatever the alignment, and nothing beside it.
#include "sim/comm/copy.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

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
  // Lengths around a line (64), a page (4096) and a block of four pages; offsets that misalign either side.
  for (std::size_t n :
       {std::size_t{0}, std::size_t{1}, std::size_t{63}, std::size_t{64}, std::size_t{65}, std::size_t{4095},
        std::size_t{16383}, std::size_t{16384}, std::size_t{16385}, std::size_t{3 * 16384 + 4097}})
    for (std::size_t from_at : {0, 1, 17, 64})
      for (std::size_t to_at : {0, 5, 33, 63}) check_copy(stream_copy, n, from_at, to_at);
}

TEST_CASE("copy_bytes lands every byte on both sides of the streaming threshold, alone or as part of a larger call") {
  const std::size_t t = stream_threshold();
  auto alone = [](void* to, const void* from, std::size_t n) { copy_bytes(to, from, n); };
  for (std::size_t n : {t - 1, t, t + 1, t + 4096 + 3}) check_copy(alone, n, 3, 29);
  // A copy below the threshold whose call lands more than it in all streams (all_to_all's chunks).
  auto part = [t](void* to, const void* from, std::size_t n) { copy_bytes(to, from, n, t); };
  for (std::size_t n : {std::size_t{1000}, t / 4 + 5}) check_copy(part, n, 7, 1);
}

TEST_CASE("the streaming threshold is half of one core's L2, within 256 KiB and 4 MiB") {
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  const std::size_t t = stream_threshold();
  CHECK(t >= (std::size_t{256} << 10));
  CHECK(t <= (std::size_t{4} << 20));
  if (l2 > 0 && static_cast<std::size_t>(l2) / 2 >= (std::size_t{256} << 10) &&
      static_cast<std::size_t>(l2) / 2 <= (std::size_t{4} << 20))
    CHECK(t == static_cast<std::size_t>(l2) / 2);
  if (l2 <= 0) CHECK(t == (std::size_t{1} << 20));
}
