// Ring reduce-scatter.
//
// Algorithm: a partial result for each chunk travels once around the ring, each rank adding its own part:
//   step 0:          rank r sends its own chunk (r-1) mod C to r+1.
//   step s in 1..C-1: rank r receives from r-1 the partial of chunk c = (r-1-s) mod C (which r-1 sent at
//                    step s-1), combines its own chunk c into it, and sends it on to r+1 (s < C-1).
//   At s = C-1, c = r: the partial now holds all C contributions and is rank r's result.
// The receive and the combine are one pass (a fold, fold.hpp): partial = op(message, own chunk c) lands as the
// message arrives; the last step lands straight in the output. Partials alternate between two scratch
// buffers, so receiving step s overlaps the send of step s-1.
//
// Cost: C-1 steps; each rank sends (C-1) n and receives (C-1) n bytes and does (C-1) n / size(dtype)
// element-wise operations. algbw = C n / time; busbw = algbw x (C-1)/C (nccl-tests).
#include <cstring>

#include "sim/comm/collectives/collectives.hpp"

namespace cpsim::collectives {

void ring_reduce_scatter(const Port& port, const void* send, void* recv, const Chunks& chunks, DType dtype,
                         ReduceOp op) {
  const int c = port.size(), r = port.rank();
  const auto* in = static_cast<const std::byte*>(send);
  if (c == 1) {
    if (recv != send && chunks.bytes[0] > 0) std::memcpy(recv, in + chunks.offset[0], chunks.bytes[0]);
    return;
  }
  const std::size_t slot = chunks.largest();
  std::byte* partial[2] = {port.comm.scratch(2 * slot), nullptr};
  partial[1] = partial[0] + slot;
  const int next = (r + 1) % c, prev = (r - 1 + c) % c;

  // STEP 0: our own part of chunk r-1 starts its trip around the ring.
  const int first = (r - 1 + c) % c;
  Pending to_next = port.send(in + chunks.offset[first], chunks.bytes[first], next);
  for (int s = 1; s < c; ++s) {
    // STEP s: receive the partial of chunk `ch`, add our part, pass it on (or keep it: ch == r at s = C-1).
    const int ch = (r - 1 - s + 2 * c) % c;
    const std::size_t bytes = chunks.bytes[ch];
    const bool last = s == c - 1;
    std::byte* buf = last ? static_cast<std::byte*>(recv) : partial[s % 2];
    Pending from_prev = port.recv_fold(buf, bytes, prev, Fold{in + chunks.offset[ch], dtype, op});
    wait(from_prev);  // buf = partial from r-1 (op) our own chunk ch
    wait(to_next);    // the other buffer (step s-1) is free again: it receives at step s+1
    if (!last) to_next = port.send(buf, bytes, next);
  }
}

}  // namespace cpsim::collectives
