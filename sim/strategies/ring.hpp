// Ring (P2P) attention on one ring of R ranks: Q stays, K/V travel, partial results merge by their LSE.
// Used alone (the `ring` strategy, R = C) and inside the hybrid (R = C/A, on the coarser layout).
#pragma once
#include "sim/strategies/strategy.hpp"

namespace cpsim {

class RingAttention {
 public:
  // ring: the ring communicator (rank g of R); layout: the R-rank layout whose positions(g) are this rank's rows.
  RingAttention(Communicator& ring, Device& dev, const SeqLayout& layout, bool causal, double scale);

  // q: [B, s, Nq, D], k, v: [B, s, Nkv, D]  ->  out: [B, s, Nq, D], lse: [B, Nq, s]
  void forward(const Buffer& q, const Buffer& k, const Buffer& v, Buffer& out, Buffer& lse);
  // dout: [B, s, Nq, D]  ->  dq: [B, s, Nq, D], dk, dv: [B, s, Nkv, D] (in the accumulator dtype)
  void backward(const Buffer& dout, DType accum, Buffer& dq, Buffer& dk, Buffer& dv);

 private:
  // Step i holds the K/V of `owner`: computes exactly the visible sub-block (forward or backward).
  void forward_block(int owner, const Buffer& kv, Buffer& out, Buffer& lse, Buffer& tile_out, Buffer& tile_lse,
                     bool first);
  void backward_block(int owner, const Buffer& kv, const Buffer& dout, Buffer& dq, Buffer& dkv);

  Communicator& ring_;
  Device& dev_;
  SeqLayout layout_;
  bool causal_;
  double scale_;
  int rank_, size_;
  // Saved by forward for backward (as autograd would): inputs, final out/lse, and the last K/V held.
  Buffer q_, out_, lse_, kv_last_;
  std::int64_t batch_ = 0;
};

}  // namespace cpsim
