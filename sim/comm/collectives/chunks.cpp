#include <algorithm>
#include <cstring>
#include <numeric>

#include "sim/comm/collectives/collectives.hpp"

namespace cpsim::collectives {

Chunks Chunks::equal(int c, std::size_t bytes_each) {
  Chunks ch;
  for (int i = 0; i < c; ++i) {
    ch.offset.push_back(static_cast<std::size_t>(i) * bytes_each);
    ch.bytes.push_back(bytes_each);
  }
  return ch;
}

Chunks Chunks::balanced(int c, std::size_t count, std::size_t elem) {
  // The first count % c chunks get one element more: lengths q+1, ..., q+1, q, ..., q with q = count / c.
  Chunks ch;
  const std::size_t q = count / c, extra = count % c;
  std::size_t at = 0;
  for (int i = 0; i < c; ++i) {
    const std::size_t n = (q + (static_cast<std::size_t>(i) < extra ? 1 : 0)) * elem;
    ch.offset.push_back(at);
    ch.bytes.push_back(n);
    at += n;
  }
  return ch;
}

void Chunks::place_own(const void* send, void* recv, int r) const {
  if (at(recv, r) != send && bytes[r] > 0) std::memcpy(at(recv, r), send, bytes[r]);
}

std::size_t Chunks::largest() const {
  return bytes.empty() ? 0 : *std::max_element(bytes.begin(), bytes.end());
}

std::size_t Chunks::total() const {
  return std::accumulate(bytes.begin(), bytes.end(), std::size_t{0});
}

}  // namespace cpsim::collectives
