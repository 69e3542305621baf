// Ring all-reduce = ring reduce-scatter, then ring all-gather.
//
// Algorithm: cut the buffer into C chunks whose lengths differ by at most one element; reduce-scatter leaves
// rank r with the reduced chunk r (written in place in the output), all-gather then hands every rank every
// reduced chunk.
//
// Cost: 2 (C-1) steps; each rank sends and receives 2 (C-1)/C of the buffer.
// algbw = buffer bytes / time; busbw = algbw x 2 (C-1)/C (nccl-tests).
#include <cstring>

#include "sim/comm/collectives/collectives.hpp"

namespace cpsim::collectives {

void ring_all_reduce(const Port& port, const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op) {
  const int c = port.size(), r = port.rank();
  const Chunks chunks = Chunks::balanced(c, count, dtype_size(dtype));
  auto* out = static_cast<std::byte*>(recv);
  // STEP 1: reduced chunk r lands at its place in the output. In place (send == recv) is safe: only chunk r
  // of the output is written, at the last step, from our own chunk r and the partial.
  ring_reduce_scatter(port, send, out + chunks.offset[r], chunks, dtype, op);
  // STEP 2: gather every reduced chunk (ours already sits at chunk r).
  ring_all_gather(port, out + chunks.offset[r], out, chunks);
}

}  // namespace cpsim::collectives
