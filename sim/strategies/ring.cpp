// Ring (P2P) context parallelism, forward and backward.
//
// Forward (rank r of R, step i = 0..R-1, the K/V held at step i belongs to owner o = (r - i) mod R):
//   1. pack k and v into one buffer kv: [2B, s, Nkv, D] (batches [0,B) = k, [B,2B) = v)
//   2. start sending kv to r+1 and receiving the next kv from r-1 (double buffer), before computing
//   3. compute the visible sub-block of Q x KV(o) (the rule below), merge it into (out, lse) by logaddexp
//   4. wait for the exchange, swap buffers; after R-1 exchanges every Q has seen every K/V
//
// Which sub-block a step computes (Transformer Engine's rule; h0/h1 are the two zigzag halves of t rows):
//   zigzag      i = 0: Q[h0,h1] x KV[h0,h1] causal ("diagonal")
//               o < r: Q[h0,h1] x KV[h0]    all visible ("lower")
//               o > r: Q[h1]    x KV[h0,h1] all visible ("upper", merged into the h1 rows only)
//   contiguous  o = r: diagonal;  o < r: full;  o > r: skipped (nothing visible)
// With zigzag every step costs every rank 2t^2 visible pairs (step 0: 2t^2 + t), hence the balance.
//
// Backward runs the ring the other way (send to r-1, receive from r+1), starting from the last K/V the forward
// held (owner r+1). At step i the rank holds K/V of owner o = (r + 1 + i) mod R and the dK/dV accumulator of
// that same owner; it adds its block's gradients, then passes K/V and the accumulator on. After R-1 hops both
// are back at their owner: R-1 K/V exchanges and R-1 dK/dV exchanges. dQ never leaves the rank.
//   lse = logaddexp(lse_a, lse_b);  out = exp(lse_a - lse) out_a + exp(lse_b - lse) out_b   (Device::merge)
#include "sim/strategies/ring.hpp"

#include <memory>
#include <utility>

namespace cpsim {

namespace {
constexpr int kTagKv = 11;
constexpr int kTagDkv = 12;
}  // namespace

RingAttention::RingAttention(Communicator& ring, Device& dev, const SeqLayout& layout, bool causal, double scale)
    : ring_(ring), dev_(dev), layout_(layout), causal_(causal), scale_(scale), rank_(ring.rank()), size_(ring.size()) {}

void RingAttention::forward_block(int owner, const Buffer& kv, Buffer& out, Buffer& lse, Buffer& tile_out,
                                  Buffer& tile_lse, bool first) {
  const std::int64_t B = batch_, t = layout_.local_len() / 2;
  const Positions q_pos = layout_.positions(rank_), k_pos = layout_.positions(owner);
  const View k = View(kv).batches(0, B), v = View(kv).batches(B, B);
  AttentionOptions opt{causal_, scale_, std::nullopt};

  // The block as (query rows, key rows, kind); step 0 writes straight into (out, lse).
  std::int64_t q0 = 0, nq = layout_.local_len(), k0 = 0, nk = layout_.local_len();
  if (!causal_ || owner == rank_) {
    opt.kind = causal_ ? BlockKind::diagonal : BlockKind::full;
  } else if (layout_.sharding() == Sharding::zigzag) {
    if (owner < rank_) {
      nk = t;  // both Q halves see the owner's early half only
      opt.kind = BlockKind::lower;
    } else {
      q0 = t;  // only the late Q half sees the owner's chunks
      nq = t;
      opt.kind = BlockKind::upper;
    }
  } else if (owner < rank_) {
    opt.kind = BlockKind::full;
  } else {
    dev_.record_skip(q_pos, k_pos, "attention_forward");  // every key is later than every query
    return;
  }
  const Positions qp = slice(q_pos, q0, nq), kp = slice(k_pos, k0, nk);
  if (first) {
    dev_.attention_forward(View(q_).rows(q0, nq), qp, k.rows(k0, nk), v.rows(k0, nk), kp, View(out).rows(q0, nq),
                           View(lse).rows(q0, nq), opt);
    return;
  }
  const View to = View(tile_out).rows(q0, nq), tl = View(tile_lse).rows(q0, nq);
  dev_.attention_forward(View(q_).rows(q0, nq), qp, k.rows(k0, nk), v.rows(k0, nk), kp, to, tl, opt);
  dev_.merge(View(out).rows(q0, nq), View(lse).rows(q0, nq), to, tl);
}

void RingAttention::forward(const Buffer& q, const Buffer& k, const Buffer& v, Buffer& out, Buffer& lse) {
  const Dims qd = q.dims(), kd = k.dims();  // q: [B, s, Nq, D]   k, v: [B, s, Nkv, D]
  batch_ = qd.b;
  q_ = q;
  // 1. kv: [2B, s, Nkv, D]; a second buffer receives the next owner's kv while this one is computed on.
  Buffer kv = dev_.alloc({2 * kd.b, kd.s, kd.n, kd.d}, k.dtype(), Layout::bsnd, "kv");
  dev_.copy(View(kv).batches(0, kd.b), View(k));
  dev_.copy(View(kv).batches(kd.b, kd.b), View(v));
  Buffer kv_next = size_ > 1 ? dev_.alloc(kv.dims(), k.dtype(), Layout::bsnd, "kv_next") : Buffer();
  out = dev_.alloc(qd, q.dtype(), Layout::bsnd, "out");
  lse = dev_.alloc({qd.b, qd.s, qd.n, 1}, q.dtype(), Layout::bns, "lse");  // [B, Nq, s]
  Buffer tile_out = size_ > 1 ? dev_.alloc(qd, q.dtype(), Layout::bsnd, "tile_out") : Buffer();
  Buffer tile_lse = size_ > 1 ? dev_.alloc(lse.dims(), q.dtype(), Layout::bns, "tile_lse") : Buffer();
  const int next = (rank_ + 1) % size_, prev = (rank_ - 1 + size_) % size_;

  for (int i = 0; i < size_; ++i) {
    ring_.recorder().step(i);
    const int owner = ((rank_ - i) % size_ + size_) % size_;
    // 2. Start the next exchange before computing, so the transfer overlaps the block.
    Request send, recv;
    if (i + 1 < size_) {
      send = ring_.isend(kv.data(), kv.bytes(), next, kTagKv);
      recv = ring_.irecv(kv_next.data(), kv_next.bytes(), prev, kTagKv);
    }
    // 3. The visible sub-block of Q x KV(owner), merged by logaddexp.
    forward_block(owner, kv, out, lse, tile_out, tile_lse, i == 0);
    // 4. Wait, then the received kv becomes the current one.
    if (i + 1 < size_) {
      send.wait();
      recv.wait();
      std::swap(kv, kv_next);
    }
  }
  out_ = out;
  lse_ = lse;
  kv_last_ = kv;  // owner r+1: where the backward ring starts
}

void RingAttention::backward_block(int owner, const Buffer& kv, const Buffer& dout, Buffer& dq, Buffer& dkv) {
  const std::int64_t B = batch_, t = layout_.local_len() / 2;
  const Positions q_pos = layout_.positions(rank_), k_pos = layout_.positions(owner);
  AttentionOptions opt{causal_, scale_, std::nullopt};
  std::int64_t q0 = 0, nq = layout_.local_len(), k0 = 0, nk = layout_.local_len();
  if (!causal_ || owner == rank_) {
    opt.kind = causal_ ? BlockKind::diagonal : BlockKind::full;
  } else if (layout_.sharding() == Sharding::zigzag) {
    if (owner < rank_) {
      nk = t;
      opt.kind = BlockKind::lower;
    } else {
      q0 = t;
      nq = t;
      opt.kind = BlockKind::upper;
    }
  } else if (owner < rank_) {
    opt.kind = BlockKind::full;
  } else {
    dev_.record_skip(q_pos, k_pos, "attention_backward");
    return;
  }
  const View k = View(kv).batches(0, B).rows(k0, nk), v = View(kv).batches(B, B).rows(k0, nk);
  const View dk = View(dkv).batches(0, B).rows(k0, nk), dv = View(dkv).batches(B, B).rows(k0, nk);
  dev_.attention_backward(View(q_).rows(q0, nq), slice(q_pos, q0, nq), k, v, slice(k_pos, k0, nk),
                          View(out_).rows(q0, nq), View(lse_).rows(q0, nq), View(dout).rows(q0, nq),
                          View(dq).rows(q0, nq), dk, dv, opt);
}

void RingAttention::backward(const Buffer& dout, DType accum, Buffer& dq, Buffer& dk, Buffer& dv) {
  const Dims kvd = kv_last_.dims();  // [2B, s, Nkv, D]
  const std::int64_t B = batch_;
  dq = dev_.alloc(q_.dims(), accum, Layout::bsnd, "dq");
  Buffer kv = kv_last_;
  kv_last_ = Buffer();
  Buffer kv_next = size_ > 1 ? dev_.alloc(kvd, kv.dtype(), Layout::bsnd, "kv_next") : Buffer();
  Buffer dkv = dev_.alloc(kvd, accum, Layout::bsnd, "dkv");  // the travelling accumulator
  Buffer dkv_next = size_ > 1 ? dev_.alloc(kvd, accum, Layout::bsnd, "dkv_next") : Buffer();
  const int to = (rank_ - 1 + size_) % size_, from = (rank_ + 1) % size_;  // the reverse ring

  for (int i = 0; i < size_; ++i) {
    ring_.recorder().step(i);
    const int owner = (rank_ + 1 + i) % size_;
    // 1. Prefetch the next K/V (it does not depend on this step).
    Request send_kv, recv_kv;
    if (i + 1 < size_) {
      send_kv = ring_.isend(kv.data(), kv.bytes(), to, kTagKv);
      recv_kv = ring_.irecv(kv_next.data(), kv_next.bytes(), from, kTagKv);
    }
    // 2. This block's dQ stays here; its dK/dV go into the accumulator of the K/V's owner.
    backward_block(owner, kv, dout, dq, dkv);
    // 3. Pass the accumulator on with its K/V; after R-1 hops both are home.
    if (i + 1 < size_) {
      Request send_dkv = ring_.isend(dkv.data(), dkv.bytes(), to, kTagDkv);
      Request recv_dkv = ring_.irecv(dkv_next.data(), dkv_next.bytes(), from, kTagDkv);
      send_kv.wait();
      recv_kv.wait();
      send_dkv.wait();
      recv_dkv.wait();
      std::swap(kv, kv_next);
      std::swap(dkv, dkv_next);
    }
  }
  // 4. Unpack the home accumulator: dk = batches [0,B), dv = batches [B,2B).
  dk = dev_.alloc({B, kvd.s, kvd.n, kvd.d}, accum, Layout::bsnd, "dk");
  dv = dev_.alloc({B, kvd.s, kvd.n, kvd.d}, accum, Layout::bsnd, "dv");
  dev_.copy(View(dk), View(dkv).batches(0, B));
  dev_.copy(View(dv), View(dkv).batches(B, B));
}

namespace {

class RingStrategy : public Strategy {
 public:
  RingStrategy(Communicator& comm, Device& dev, const Problem& p)
      : p_(p), ring_(comm, dev, SeqLayout(p.ranks, p.seq, p.sharding), p.causal, p.scale), comm_(comm) {}

  LocalOutput forward(const Buffer& q, const Buffer& k, const Buffer& v) override {
    LocalOutput o;
    ring_.forward(q, k, v, o.out, o.lse);
    o.lse_positions = SeqLayout(p_.ranks, p_.seq, p_.sharding).positions(comm_.rank());
    return o;
  }

  LocalGrads backward(const Buffer& dout) override {
    LocalGrads g;
    ring_.backward(dout, p_.accum_dtype(), g.dq, g.dk, g.dv);
    return g;
  }

 private:
  Problem p_;
  RingAttention ring_;
  Communicator& comm_;
};

}  // namespace

std::unique_ptr<Strategy> make_ring(Communicator& comm, Device& dev, const Problem& p) {
  return std::make_unique<RingStrategy>(comm, dev, p);
}

}  // namespace cpsim
