// Ring (P2P) attention on one ring of R ranks: Q stays, K/V travel, partial results merge by their LSE.
// Used alone (the `ring` strategy, R = C) and inside the hybrid (R = C/A, on the coarser layout).
#pragma once
#include "sim/strategies/strategy.hpp"

namespace cpsim {

// The part of (this rank's Q rows) x (the owner's K/V rows) that a ring step computes: local query rows
// [q0, q0 + nq) against the owner's local key rows [k0, k0 + nk), labelled `kind`; kind skipped (all zero) when no
// pair is visible. The block is the bounding box of the visible pairs: with lo(q) and hi(q) the first and last key
// position a query sees (mask.hpp; both never decrease as q grows, and positions ascend),
//   q0       the first query row with hi(q) >= the owner's first key,
//   q0 + nq  one past the last query row with lo(q) <= the owner's last key,
//   k0       the first key >= lo(q_q0),  k0 + nk  one past the last key <= hi(q_last)
// For the causal mask this is Transformer Engine's rule, with t = S/(2R) rows per zigzag chunk (the two halves
// h0, h1 of a rank's 2t rows):
//   owner == rank      all rows x all rows, causal: diagonal
//   zigzag, owner < r  Q[h0, h1] x KV[h0]: both query chunks see the owner's early chunk only, half_kv
//   zigzag, owner > r  Q[h1] x KV[h0, h1]: only the late query chunk sees the owner, half_q
//   contiguous         owner < r: all x all, full;  owner > r: every key is later than every query, skipped
//   full attention     every step: all rows x all rows, full
// With zigzag every step costs every rank 2t^2 visible pairs (step 0: 2t^2 + t), hence the balance. Under
// documents, a window or striped sharding a box the mask covers in part is `partial` (striped: every step is a
// near-diagonal block, k <= q for owners up to r and k < q after it, as in Striped Attention).
struct RingBlock {
  std::int64_t q0 = 0, nq = 0, k0 = 0, nk = 0;
  BlockKind kind = BlockKind::skipped;
};
RingBlock visible_block(const SeqLayout& layout, int rank, int owner, const Mask& mask);
// The query rows of q that see some key of k, [first, first + count): contiguous, since a row's visible keys
// [mask.lo, mask.hi] move up with its position.
struct SeeingRows {
  std::int64_t first = 0, count = 0;
};
SeeingRows rows_seeing(const Positions& q, const Positions& k, const Mask& mask);

class RingAttention {
 public:
  // ring: the ring communicator (rank g of R); layout: the R-rank layout whose positions(g) are this rank's rows.
  RingAttention(Communicator& ring, Device& dev, const SeqLayout& layout, Mask mask, double scale);

  // q: [B, s, Nq, D], k, v: [B, s, Nkv, D]  ->  out: [B, s, Nq, D], lse: [B, Nq, s]. The R ring steps are marked
  // first_step, first_step + 1, ... in the Recorder (the hybrid's ring steps follow its all-to-all step).
  void forward(const Buffer& q, const Buffer& k, const Buffer& v, Buffer& out, Buffer& lse, int first_step = 0);
  // dout: [B, s, Nq, D]  ->  dq: [B, s, Nq, D], dk, dv: [B, s, Nkv, D] (in the accumulator dtype)
  void backward(const Buffer& dout, DType accum, Buffer& dq, Buffer& dk, Buffer& dv, int first_step = 0);

  const SeqLayout& layout() const { return layout_; }
  Positions positions() const { return layout_.positions(rank_); }  // this rank's rows, ascending

 private:
  // The visible block of Q x KV(owner), forward (merged into out, lse) and backward (dQ added into dq, dK/dV into
  // dkv). A skipped block is recorded as such.
  void forward_block(int owner, const Buffer& kv, Buffer& out, Buffer& lse, Buffer& tile_out, Buffer& tile_lse,
                     bool first);
  void backward_block(int owner, const RingBlock& block, const Buffer& kv, const Buffer& dout, Buffer& dq,
                      const Buffer& dkv);

  Communicator& ring_;
  Device& dev_;
  SeqLayout layout_;
  Mask mask_;
  double scale_;
  int rank_, size_;
  // Saved by forward for backward (as autograd would): inputs, final out/lse, and the last K/V held.
  Buffer q_, out_, lse_, kv_last_;
  std::int64_t batch_ = 0;
};

}  // namespace cpsim
