// Ring (P2P) context parallelism, forward and backward.
//
// Forward (rank r of R, step i = 0..R-1, the K/V held at step i belongs to owner o = (r - i) mod R):
//   1. pack k and v into one buffer kv: [2B, s, Nkv, D] (batches [0,B) = k, [B,2B) = v)
//   2. start sending kv to r+1 and receiving the next kv from r-1 (double buffer), before computing
//   3. compute the visible sub-block of Q x KV(o) under the mask (visible_block, ring.hpp), merge it into (out, lse)
//      by logaddexp
//   4. wait for the exchange, swap buffers; after R-1 exchanges every Q has seen every K/V
//   lse = logaddexp(lse_a, lse_b);  out = exp(lse_a - lse) out_a + exp(lse_b - lse) out_b   (Device::merge)
//
// Backward runs the ring the other way (send to r-1, receive from r+1), starting from the last K/V the forward
// held (owner r+1). At step i the rank holds K/V of owner o = (r + 1 + i) mod R, and the dK/dV accumulator of that
// same owner is on its way from r+1, which added its block to it and passed it on after its own step i-1:
//   1. start sending K/V on and receiving the next K/V (as forward)
//   2. compute the block: dQ into dq; dK/dV into a block buffer (at step 0 straight into the accumulator, which
//      starts here at zero)
//   3. wait for o's accumulator, add the block's dK/dV to it, and pass it on: it is waited for by r-1 only after
//      r-1 has computed its next block, so the transfer hides behind that compute (as ring-flash-attention does)
// After R-1 hops both K/V and accumulator are back at their owner: R-1 K/V exchanges and R-1 dK/dV exchanges.
// dQ never leaves the rank.
#include "sim/strategies/ring.hpp"

#include <memory>
#include <utility>

namespace cpsim {

namespace {
constexpr int kTagKv = 11;
constexpr int kTagDkv = 12;
}  // namespace

SeeingRows rows_seeing(const Positions& q, const Positions& k, const Mask& mask) {
  const auto first_row = [&](auto pred) {  // the first row i with pred(q_i); q.size() when none
    std::int64_t a = 0, b = q.size();
    while (a < b) {
      const std::int64_t m = (a + b) / 2;
      if (pred(q.at(m)))
        b = m;
      else
        a = m + 1;
    }
    return a;
  };
  const std::int64_t q0 = first_row([&](std::int64_t p) { return mask.hi(p) >= k.front(); });
  const std::int64_t q1 = first_row([&](std::int64_t p) { return mask.lo(p) > k.back(); });
  return {q0, q1 > q0 ? q1 - q0 : 0};
}

RingBlock visible_block(const SeqLayout& layout, int rank, int owner, const Mask& mask) {
  const Positions q = layout.positions(rank), k = layout.positions(owner);
  const std::int64_t pairs = visible_pairs(q, k, mask);
  if (pairs == 0) return {};
  // 1. The query rows that can see a key of the owner, then the keys those rows can see (lo, hi monotone).
  const SeeingRows rows = rows_seeing(q, k, mask);
  const std::int64_t q0 = rows.first, q1 = rows.first + rows.count;
  const std::int64_t k0 = k.lower_bound(mask.lo(q.at(q0))), k1 = k.upper_bound(mask.hi(q.at(q1 - 1)));
  RingBlock b{q0, q1 - q0, k0, k1 - k0, BlockKind::partial};
  // 2. Its label: every pair of the box visible (full, or TE's half-kv / half-q blocks), the diagonal, or partial.
  const std::int64_t s = layout.local_len();
  if (pairs == b.nq * b.nk)
    b.kind = b.nq == s && b.nk < s && k0 == 0 ? BlockKind::half_kv
             : b.nq < s && b.nk == s          ? BlockKind::half_q
                                              : BlockKind::full;
  else if (owner == rank)
    b.kind = BlockKind::diagonal;
  return b;
}

RingAttention::RingAttention(Communicator& ring, Device& dev, const SeqLayout& layout, Mask mask, double scale)
    : ring_(ring),
      dev_(dev),
      layout_(layout),
      mask_(std::move(mask)),
      scale_(scale),
      rank_(ring.rank()),
      size_(ring.size()) {}

void RingAttention::forward_block(int owner, const Buffer& kv, Buffer& out, Buffer& lse, Buffer& tile_out,
                                  Buffer& tile_lse, bool first) {
  const Positions q_pos = layout_.positions(rank_), k_pos = layout_.positions(owner);
  const RingBlock b = visible_block(layout_, rank_, owner, mask_);
  if (b.kind == BlockKind::skipped) return dev_.record_skip(q_pos, k_pos, "attention_forward");
  const View q = View(q_).rows(b.q0, b.nq), k = View(kv).batches(0, batch_).rows(b.k0, b.nk),
             v = View(kv).batches(batch_, batch_).rows(b.k0, b.nk);
  const Positions qp = slice(q_pos, b.q0, b.nq), kp = slice(k_pos, b.k0, b.nk);
  const AttentionOptions opt{mask_, scale_, b.kind};
  if (first) {  // step 0 (always the diagonal block) writes straight into (out, lse)
    dev_.attention_forward(q, qp, k, v, kp, View(out).rows(b.q0, b.nq), View(lse).rows(b.q0, b.nq), opt);
    return;
  }
  const View to = View(tile_out).rows(b.q0, b.nq), tl = View(tile_lse).rows(b.q0, b.nq);
  dev_.attention_forward(q, qp, k, v, kp, to, tl, opt);
  dev_.merge(View(out).rows(b.q0, b.nq), View(lse).rows(b.q0, b.nq), to, tl);
}

void RingAttention::forward(const Buffer& q, const Buffer& k, const Buffer& v, Buffer& out, Buffer& lse,
                            int first_step) {
  const Dims qd = q.dims(), kd = k.dims();  // q: [B, s, Nq, D]   k, v: [B, s, Nkv, D]
  batch_ = qd.b;
  q_ = q;
  // 1. kv: [2B, s, Nkv, D]; a second buffer receives the next owner's kv while this one is computed on. Both travel
  //    the ring as they are: message buffers.
  const BufferUse travels = size_ > 1 ? BufferUse::message : BufferUse::work;
  Buffer kv = dev_.alloc({2 * kd.b, kd.s, kd.n, kd.d}, k.dtype(), Layout::bsnd, "kv", travels);
  dev_.copy(View(kv).batches(0, kd.b), View(k));
  dev_.copy(View(kv).batches(kd.b, kd.b), View(v));
  Buffer kv_next = size_ > 1 ? dev_.alloc(kv.dims(), k.dtype(), Layout::bsnd, "kv_next", travels) : Buffer();
  out = dev_.alloc(qd, q.dtype(), Layout::bsnd, "out");
  lse = dev_.alloc({qd.b, qd.s, qd.n, 1}, q.dtype(), Layout::bns, "lse");  // [B, Nq, s]
  Buffer tile_out = size_ > 1 ? dev_.alloc(qd, q.dtype(), Layout::bsnd, "tile_out") : Buffer();
  Buffer tile_lse = size_ > 1 ? dev_.alloc(lse.dims(), q.dtype(), Layout::bns, "tile_lse") : Buffer();
  const int next = (rank_ + 1) % size_, prev = (rank_ - 1 + size_) % size_;

  for (int i = 0; i < size_; ++i) {
    ring_.recorder().step(first_step + i);
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

void RingAttention::backward_block(int owner, const RingBlock& b, const Buffer& kv, const Buffer& dout, Buffer& dq,
                                   const Buffer& dkv) {
  const Positions q_pos = layout_.positions(rank_), k_pos = layout_.positions(owner);
  if (b.kind == BlockKind::skipped) return dev_.record_skip(q_pos, k_pos, "attention_backward");
  const std::int64_t B = batch_;
  const View k = View(kv).batches(0, B).rows(b.k0, b.nk), v = View(kv).batches(B, B).rows(b.k0, b.nk);
  const View dk = View(dkv).batches(0, B).rows(b.k0, b.nk), dv = View(dkv).batches(B, B).rows(b.k0, b.nk);
  const auto rows = [&](const Buffer& x) { return View(x).rows(b.q0, b.nq); };
  dev_.attention_backward(rows(q_), slice(q_pos, b.q0, b.nq), k, v, slice(k_pos, b.k0, b.nk), rows(out_), rows(lse_),
                          rows(dout), rows(dq), dk, dv, {mask_, scale_, b.kind});
}

void RingAttention::backward(const Buffer& dout, DType accum, Buffer& dq, Buffer& dk, Buffer& dv, int first_step) {
  const Dims kvd = kv_last_.dims();  // [2B, s, Nkv, D]
  const std::int64_t B = batch_;
  const bool ring = size_ > 1;
  dq = dev_.alloc(q_.dims(), accum, Layout::bsnd, "dq");
  Buffer kv = kv_last_;
  kv_last_ = Buffer();
  const BufferUse travels = ring ? BufferUse::message : BufferUse::work;  // sent and received as they are
  Buffer kv_next = ring ? dev_.alloc(kvd, kv.dtype(), Layout::bsnd, "kv_next", travels) : Buffer();
  // The travelling dK/dV accumulators ([2B, s, Nkv, D]: dK batches [0,B), dV [B,2B)): dkv is the one of the owner
  // whose K/V is held, dkv_next receives the next owner's, dkv_block holds a block's dK/dV until dkv_next arrives.
  Buffer dkv = dev_.alloc(kvd, accum, Layout::bsnd, "dkv", travels);
  Buffer dkv_next = ring ? dev_.alloc(kvd, accum, Layout::bsnd, "dkv_next", travels) : Buffer();
  Buffer dkv_block = ring ? dev_.alloc(kvd, accum, Layout::bsnd, "dkv_block") : Buffer();
  const int to = (rank_ - 1 + size_) % size_, from = (rank_ + 1) % size_;  // the reverse ring
  Request send_dkv, recv_dkv;  // posted after a block, waited after the next one

  for (int i = 0; i < size_; ++i) {
    ring_.recorder().step(first_step + i);
    const int owner = (rank_ + 1 + i) % size_;
    const RingBlock b = visible_block(layout_, rank_, owner, mask_);
    // 1. Prefetch the next K/V (it does not depend on this step).
    Request send_kv, recv_kv;
    if (i + 1 < size_) {
      send_kv = ring_.isend(kv.data(), kv.bytes(), to, kTagKv);
      recv_kv = ring_.irecv(kv_next.data(), kv_next.bytes(), from, kTagKv);
    }
    // 2. The block: dQ stays here; dK/dV into the accumulator that starts here (step 0), else into dkv_block while
    //    the owner's accumulator is still in flight.
    if (i == 0) {
      backward_block(owner, b, kv, dout, dq, dkv);
    } else {
      if (b.kind != BlockKind::skipped) dev_.fill(View(dkv_block).rows(b.k0, b.nk), 0.0);
      backward_block(owner, b, kv, dout, dq, dkv_block);
      // 3. The owner's accumulator has come from r+1 (and ours of the last step has left): add this block to it.
      recv_dkv.wait();
      send_dkv.wait();
      if (b.kind != BlockKind::skipped) dev_.add(View(dkv_next).rows(b.k0, b.nk), View(dkv_block).rows(b.k0, b.nk));
      std::swap(dkv, dkv_next);
    }
    // 4. Pass the accumulator on (waited for after the next block) and take the next K/V; after R-1 hops both are
    //    home.
    if (i + 1 < size_) {
      send_dkv = ring_.isend(dkv.data(), dkv.bytes(), to, kTagDkv);
      recv_dkv = ring_.irecv(dkv_next.data(), dkv_next.bytes(), from, kTagDkv);
      send_kv.wait();
      recv_kv.wait();
      std::swap(kv, kv_next);
    }
  }
  // 5. Unpack the home accumulator: dk = batches [0,B), dv = batches [B,2B).
  dk = dev_.alloc({B, kvd.s, kvd.n, kvd.d}, accum, Layout::bsnd, "dk");
  dv = dev_.alloc({B, kvd.s, kvd.n, kvd.d}, accum, Layout::bsnd, "dv");
  dev_.copy(View(dk), View(dkv).batches(0, B));
  dev_.copy(View(dv), View(dkv).batches(B, B));
}

namespace {

class RingStrategy : public Strategy {
 public:
  RingStrategy(Communicator& comm, Device& dev, const Problem& p)
      : accum_(p.accum_dtype()), ring_(comm, dev, p.layout(), p.mask(), p.scale) {}

  LocalOutput forward(const Buffer& q, const Buffer& k, const Buffer& v) override {
    LocalOutput o;
    ring_.forward(q, k, v, o.out, o.lse);
    o.lse_positions = ring_.positions();
    return o;
  }

  LocalGrads backward(const Buffer& dout) override {
    LocalGrads g;
    ring_.backward(dout, accum_, g.dq, g.dk, g.dv);
    return g;
  }

 private:
  DType accum_;
  RingAttention ring_;
};

}  // namespace

std::unique_ptr<Strategy> make_ring(Communicator& comm, Device& dev, const Problem& p) {
  return std::make_unique<RingStrategy>(comm, dev, p);
}

}  // namespace cpsim
