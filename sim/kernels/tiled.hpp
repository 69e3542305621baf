// The tiled attention kernel every simulated rank runs on the CPU (flash-attention's algorithm, Eigen products).
//
// Views are boxes of [B, S, N, D] buffers (out, dq, ...) and [B, N, S] LSE buffers; a head's rows are D values
// apart by N*D (the outer stride), so tiles are Eigen maps over the buffers, never copies.
// Queries and keys are cut into tiles of `tile` rows. Under every mask a query row sees one range of the
// (ascending) key rows, [lo_i, hi_i), and lo_i, hi_i never decrease with i (mask.hpp). A (query tile, key tile) is
//   masked  (no row's range meets the tile's keys): skipped without touching its data,
//   visible (every row's range covers them): computed without a mask,
//   partial (otherwise): computed, and each row keeps the keys of its range.
// Every view must hold T (float or double); Device::attention_* has checked extents and head grouping.
#pragma once
#include "sim/core/buffer.hpp"
#include "sim/core/positions.hpp"
#include "sim/kernels/device.hpp"

namespace cpsim {

// Forward, per (batch, head, query tile), online softmax over the key tiles, scores s = scale * q k^T:
//   m' = max(m, rowmax(s));  p = exp(s - m');  l = exp(m - m') l + rowsum(p);  acc = exp(m - m') acc + p v
//   out = acc / l,  lse = m + log l.           A row that sees no key: out 0, lse -inf.
// q: [B, sq, Nq, D], k, v: [B, sk, Nkv, D] -> out: [B, sq, Nq, D], lse: [B, Nq, sq] (overwritten).
template <class T>
TileCounts tiled_forward(const View& q, const Positions& q_pos, const View& k, const View& v, const Positions& k_pos,
                         const View& out, const View& lse, const Mask& mask, double scale, int tile);

// Backward, per (batch, kv head, key tile), over the query heads of its group and the query tiles:
//   p = exp(s - lse);  dv += p^T dout;  dp = dout v^T;  ds = p * (dp - Di), Di = rowsum(dout * out)
//   dq += scale ds k;  dk += scale ds^T q.       ADDS into dq [B, sq, Nq, D] and dk, dv [B, sk, Nkv, D].
// out and lse are the rows' final forward results; rows with lse = -inf get no gradient.
template <class T>
TileCounts tiled_backward(const View& q, const Positions& q_pos, const View& k, const View& v, const Positions& k_pos,
                          const View& out, const View& lse, const View& dout, const View& dq, const View& dk,
                          const View& dv, const Mask& mask, double scale, int tile);

}  // namespace cpsim
