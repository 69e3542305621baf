// All-reduce = reduce-scatter, then all-gather, each by the ring or directly (the communicator's choice:
// collectives.hpp).
//
// Algorithm: cut the buffer into C chunks whose lengths differ by at most one element; reduce-scatter leaves
// rank r with the reduced chunk r (written in place in the output), all-gather then hands every rank every
// reduced chunk.
//
// Cost: each rank sends and receives 2 (C-1)/C of the buffer; the ring takes 2 (C-1) steps.
// algbw = buffer bytes / time; busbw = algbw x 2 (C-1)/C (nccl-tests).
#include "sim/comm/collectives/collectives.hpp"

namespace cpsim::collectives {

void all_reduce(const Port& port, const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op,
                CollectiveAlgorithm algorithm) {
  const int c = port.size(), r = port.rank();
  const Chunks chunks = Chunks::balanced(c, count, dtype_size(dtype));
  auto* out = static_cast<std::byte*>(recv);
  const bool ring = algorithm == CollectiveAlgorithm::ring;
  // STEP 1: reduced chunk r lands at its place in the output. In place (send == recv) is safe: only chunk r
  // of the output is written before every other rank has read what it needs of our input (our sends are
  // complete when reduce-scatter returns), and chunk r is our own part, which both algorithms read before
  // they write it (the direct one keeps its partial elsewhere then).
  (ring ? ring_reduce_scatter : direct_reduce_scatter)(port, send, out + chunks.offset[r], chunks, dtype, op);
  // STEP 2: gather every reduced chunk (ours already sits at chunk r).
  (ring ? ring_all_gather : direct_all_gather)(port, out + chunks.offset[r], out, chunks);
}

}  // namespace cpsim::collectives
