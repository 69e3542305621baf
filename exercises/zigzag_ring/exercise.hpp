// The zigzag ring exercise: the two functions the learner writes in zigzag_ring.cpp, called by the judge.
//
// Read lessons 3, 4 and 5 first. The library's interfaces you will use:
//   Communicator (sim/comm/communicator.hpp): rank(), size(), isend/irecv (Request::wait), sendrecv, recorder()
//   Device (sim/kernels/device.hpp): alloc, copy, fill, attention_forward (with global positions), merge
//   SeqLayout (sim/layout/layout.hpp): positions(rank), local_len(), chunk_len()
//   Buffer / View (sim/core/buffer.hpp): View(buf).rows(first, count) and .batches(first, count) select sub-boxes
#pragma once
#include <vector>

#include "sim/comm/communicator.hpp"
#include "sim/kernels/device.hpp"
#include "sim/layout/layout.hpp"

namespace cpsim::exercise {

// The chunks (of the 2C chunks of the sequence) that rank `rank` of `ranks` owns under zigzag sharding, in the
// order of its local rows: the early chunk first, then the late one.
std::vector<int> zigzag_chunks(int rank, int ranks);

// Zigzag ring attention, forward, on one rank (causal).
//   comm    the ring: this rank is comm.rank() of C = comm.size(); send to rank + 1, receive from rank - 1
//   dev     this rank's device
//   layout  the C-rank zigzag layout: layout.positions(r) are the global positions of rank r's rows
//   q       [B, s, Nq, D]   this rank's rows (s = S/C: the early chunk's t rows, then the late chunk's t rows)
//   k, v    [B, s, Nkv, D]  the same rows' keys and values
//   out     [B, s, Nq, D]   zero-filled: write the attention output of this rank's rows here
//   lse     [B, Nq, s]      zero-filled: write each row's log-sum-exp here
//   scale   the softmax scale: pass it to attention_forward as AttentionOptions{true, scale, std::nullopt}
// Call comm.recorder().step(i) at the start of step i (i = 0 .. C-1): the judge reads the work of every step.
void zigzag_ring_forward(Communicator& comm, Device& dev, const SeqLayout& layout, const Buffer& q, const Buffer& k,
                         const Buffer& v, const Buffer& out, const Buffer& lse, double scale);

}  // namespace cpsim::exercise
