// The ring backward exercise: the function the learner writes in ring_backward.cpp, called by the judge.
//
// Read lessons 3, 4 and 7 first (7: what backward needs from the forward, and the travelling accumulator). The
// library's interfaces you will use:
//   Communicator (sim/comm/communicator.hpp): rank(), size(), isend/irecv (Request::wait), sendrecv
//   Device (sim/kernels/device.hpp): alloc (zero-filled), copy, attention_backward (it ADDS into dq, dk, dv)
//   SeqLayout (sim/layout/layout.hpp): positions(rank), the global positions of a rank's rows
//   Buffer / View (sim/core/buffer.hpp): View(buf).batches(first, count) and .rows(first, count) select sub-boxes
#pragma once
#include "sim/comm/communicator.hpp"
#include "sim/kernels/device.hpp"
#include "sim/layout/layout.hpp"

namespace cpsim::exercise {

// Ring attention, backward, on one rank (causal). The forward ran already: its results are given.
//   comm          the ring: this rank is r = comm.rank() of C = comm.size()
//   dev           this rank's device
//   layout        the C-rank zigzag layout: layout.positions(o) are the global positions of rank o's rows
//   q             [B, s, Nq, D]   this rank's queries
//   k_last, v_last [B, s, Nkv, D] the keys and values of rank (r + 1) mod C: the forward ring ends holding them,
//                                 so the backward starts there (with C = 1 they are this rank's own)
//   out           [B, s, Nq, D]   the forward's output for this rank's rows, final: every block merged
//   lse           [B, Nq, s]      the forward's log-sum-exp for the same rows, final
//   dout          [B, s, Nq, D]   the gradient of out
//   dq            [B, s, Nq, D]   zero-filled: write dQ of this rank's rows here
//   dk, dv        [B, s, Nkv, D]  zero-filled: write dK and dV of this rank's own keys and values here
//   scale         the softmax scale: pass it to attention_backward as AttentionOptions{true, scale, std::nullopt}
// dQ never leaves the rank. K/V and their dK/dV accumulator travel together, C-1 hops each, and come home.
void ring_attention_backward(Communicator& comm, Device& dev, const SeqLayout& layout, const Buffer& q,
                             const Buffer& k_last, const Buffer& v_last, const Buffer& out, const Buffer& lse,
                             const Buffer& dout, const Buffer& dq, const Buffer& dk, const Buffer& dv, double scale);

}  // namespace cpsim::exercise
