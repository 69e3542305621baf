// Pairwise all-to-all.
//
// Algorithm: rank r copies its own chunk, then in step s in 1..C-1 sends chunk (r+s) mod C to rank r+s and
// receives from rank r-s the chunk that rank addressed to r. Every step is a perfect matching of senders to
// receivers, for any C (not only powers of two). All C-1 sends and receives are posted at once, in that step
// order, and waited afterwards: a rank never blocks on one slow peer while messages from others could move
// (on both CPU backends a send completes at once, and the receiving rank copies each message in).
//
// Cost: C-1 steps; each rank sends (C-1) n and receives (C-1) n bytes ((C-1)/C of its data leaves it).
// algbw = C n / time; busbw = algbw x (C-1)/C (nccl-tests).
#include <cstring>
#include <vector>

#include "sim/comm/collectives/collectives.hpp"

namespace cpsim::collectives {

void pairwise_all_to_all(const Port& port, const void* send, void* recv, std::size_t bytes_per_rank) {
  const int c = port.size(), r = port.rank();
  const auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  const std::size_t n = bytes_per_rank;
  if (n > 0) std::memcpy(out + r * n, in + r * n, n);
  std::vector<Pending> pending;
  pending.reserve(2 * static_cast<std::size_t>(c));
  for (int s = 1; s < c; ++s) {
    const int to = (r + s) % c, from = (r - s + c) % c;
    pending.push_back(port.recv(out + from * n, n, from));
    pending.push_back(port.send(in + to * n, n, to));
  }
  for (Pending& p : pending) wait(p);
}

}  // namespace cpsim::collectives
