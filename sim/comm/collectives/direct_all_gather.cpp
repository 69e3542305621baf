// Direct all-gather: the threads and processes backends' form.
//
// Algorithm: rank r copies its own chunk into place, then posts, all at once, its own chunk to every other
// rank (to r+1, r+2, ..., r+C-1) and a receive from every other rank (from r-1, r-2, ..., r-C+1), and waits
// for them all. Every message is read from its sender's input, which no step writes: on a machine whose ranks
// share memory, the ring's forwarding (rank r sends at step s+1 what it received at step s) only makes each
// copy read data another core has just written, and chains the steps (threads, 4 ranks on 2 cores, 1 MiB
// chunks: the ring took 1.6 times as long; docs/performance/comm.md).
//
// Cost: one round; each rank sends (C-1) n and receives (C-1) n bytes, the same bytes and messages as the
// ring. algbw = C n / time; busbw = algbw x (C-1)/C (nccl-tests).
#include <vector>

#include "sim/comm/collectives/collectives.hpp"

namespace cpsim::collectives {

void direct_all_gather(const Port& port, const void* send, void* recv, const Chunks& chunks) {
  const int c = port.size(), r = port.rank();
  auto at = [&](int chunk) { return chunks.at(recv, chunk); };
  chunks.place_own(send, recv, r);
  std::vector<Pending> pending;
  pending.reserve(2 * static_cast<std::size_t>(c));
  for (int s = 1; s < c; ++s) {
    const int to = (r + s) % c, from = (r - s + c) % c;
    pending.push_back(port.recv(at(from), chunks.bytes[from], from));
    pending.push_back(port.send(send, chunks.bytes[r], to));
  }
  for (Pending& p : pending) wait(p);
}

}  // namespace cpsim::collectives
