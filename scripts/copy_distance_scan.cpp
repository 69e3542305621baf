// memcpy and the transports' line copy (sim/comm/copy.hpp) at every 8 bytes of distance between destination and
// source modulo 4 KiB (where memcpy stalls: sim/comm/copy.cpp), from sources at three offsets into a page.
// For each size and source offset: the median GB/s of both over all distances, then each distance where memcpy ran
// under a quarter of its median, with both figures there.
//
//   g++ -O2 -std=c++20 -I. scripts/copy_distance_scan.cpp sim/comm/copy.cpp -o copy_distance_scan
//   ./copy_distance_scan
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "sim/comm/copy.hpp"

namespace {

constexpr std::size_t kPage = 4096, kStep = 8;

// Best of 8 copies of n bytes, GB/s.
template <class Copy>
double gbps(Copy copy, char* to, const char* from, std::size_t n) {
  double best = 1e300;
  for (int r = 0; r < 8; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    copy(to, from, n);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return static_cast<double>(n) / best / 1e9;
}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  constexpr std::size_t kSpan = std::size_t{16} << 20;
  char* base = static_cast<char*>(std::aligned_alloc(kPage, 2 * kSpan));
  std::memset(base, 1, 2 * kSpan);
  auto plain = [](void* to, const void* from, std::size_t n) { std::memcpy(to, from, n); };
  for (std::size_t n : {std::size_t{4} << 10, std::size_t{64} << 10, std::size_t{256} << 10, std::size_t{512} << 10})
    for (std::size_t at : {std::size_t{0}, std::size_t{8}, std::size_t{40}}) {
      const char* from = base + at;
      std::vector<double> mem, line;
      for (std::size_t gap = 0; gap < kPage; gap += kStep) {
        char* to = base + kSpan + at + gap;
        mem.push_back(gbps(plain, to, from, n));
        line.push_back(gbps(cpsim::line_copy, to, from, n));
      }
      const double mm = median(mem), ml = median(line);
      std::printf(
          "%4zu KiB, source at +%2zu: median memcpy %.1f GB/s, line copy %.1f GB/s; memcpy under a quarter of "
          "that at:",
          n >> 10, at, mm, ml);
      for (std::size_t i = 0; i < mem.size(); ++i)
        if (mem[i] < mm / 4) std::printf(" %zu (memcpy %.1f, line %.1f)", i * kStep, mem[i], line[i]);
      std::printf("\n");
    }
  std::free(base);
}
