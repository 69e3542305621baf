// Ring all-gather.
//
// Algorithm: rank r keeps its own chunk, then for C-1 steps forwards to r+1 the chunk it received last
// (its own at step 0) and receives from r-1 the next one:
//   step s in 0..C-2: send chunk (r - s) mod C to r+1, receive chunk (r - s - 1) mod C from r-1.
// After step s rank r holds chunks r, r-1, ..., r-s-1; after C-1 steps it holds all C.
// Chunks are received in place into the output and forwarded from there: no staging copy.
//
// Cost: C-1 steps of one chunk each way; each rank sends (C-1) n and receives (C-1) n bytes.
// algbw = C n / time; busbw = algbw x (C-1)/C (nccl-tests), i.e. the bytes each rank moves per second.

#include "sim/comm/collectives/collectives.hpp"

namespace cpsim::collectives {

void ring_all_gather(const Port& port, const void* send, void* recv, const Chunks& chunks) {
  const int c = port.size(), r = port.rank();
  auto at = [&](int chunk) { return chunks.at(recv, chunk); };
  chunks.place_own(send, recv, r);
  const int next = (r + 1) % c, prev = (r - 1 + c) % c;
  for (int s = 0; s < c - 1; ++s) {
    const int out_chunk = (r - s + c) % c, in_chunk = (r - s - 1 + 2 * c) % c;
    Pending to_next = port.send(at(out_chunk), chunks.bytes[out_chunk], next);
    Pending from_prev = port.recv(at(in_chunk), chunks.bytes[in_chunk], prev);
    wait(from_prev);
    wait(to_next);
  }
}

}  // namespace cpsim::collectives
