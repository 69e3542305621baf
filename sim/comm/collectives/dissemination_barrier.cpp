// Dissemination barrier.
//
// Algorithm: in round k (distance d = 2^k < C) rank r sends an empty message to r+d and waits for one from
// r-d. After round k, rank r has heard (directly or through others) from the 2^(k+1) ranks before it, so after
// ceil(log2 C) rounds every rank knows that every other rank has arrived.
//
// Cost: ceil(log2 C) rounds of one empty message each way; no payload.
#include "sim/comm/collectives/collectives.hpp"

namespace cpsim::collectives {

void dissemination_barrier(const Port& port) {
  const int c = port.size(), r = port.rank();
  for (int d = 1; d < c; d *= 2) {
    Pending a = port.send(nullptr, 0, (r + d) % c);
    Pending b = port.recv(nullptr, 0, (r - d + c) % c);
    wait(b);
    wait(a);
  }
}

}  // namespace cpsim::collectives
