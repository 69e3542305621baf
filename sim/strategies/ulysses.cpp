// All-to-all (DeepSpeed-Ulysses) context parallelism, forward and backward.
//
// Outside attention the sequence is distributed; inside attention the heads are. Shapes on one rank:
//   forward   q, k, v in:          [B, S/C, N, D]
//             after the A2A:       [B, S, N/C, D]     (every position, N/C heads)
//             local attention out: [B, S, N/C, D]
//             after the inverse:   [B, S/C, N, D]
//   backward  dout in [B, S/C, N, D] -> A2A -> [B, S, N/C, D] -> local backward -> dq, dk, dv [B, S, N/C, D]
//             -> inverse A2A each -> [B, S/C, N, D]
// Steps (forward): 0. A2A q, k, v   1. attention under the mask over the full sequence for N/C heads   2. A2A out back.
// Steps (backward): 0. A2A dout   1. local attention backward   2. A2A dq, dk, dv back.
// Communication: 4 all-to-alls forward, 4 backward, each sending (C-1)/C of a rank's tensor.
// Limit: Nq % C == 0 and Nkv % C == 0. With --kv-replicate and C > Nkv, HeadsExchange first copies each KV head onto
// C/Nkv ranks, so the K and V all-to-alls carry C/Nkv times more bytes, and sums the replicas' dK/dV backward.
#include <memory>

#include "sim/strategies/heads_exchange.hpp"
#include "sim/strategies/strategy.hpp"

namespace cpsim {
namespace {

class UlyssesStrategy : public Strategy {
 public:
  UlyssesStrategy(Communicator& comm, Device& dev, const Problem& p)
      : comm_(comm),
        dev_(dev),
        p_(p),
        mask_(p.mask()),
        a2a_(comm, dev, p.layout(), rank_range(0, p.ranks), p.kv_heads, p.replicates_kv(StrategyKind::ulysses)) {}

  LocalOutput forward(const Buffer& q, const Buffer& k, const Buffer& v) override {
    // 0. Sequence sharding -> head sharding.
    comm_.recorder().step(0);
    in_ = a2a_.to_heads(q, k, v);
    // 1. Ordinary attention over every position for this rank's heads.   in_.q: [B, S, Nq/C, D]
    comm_.recorder().step(1);
    const Dims qd = in_.q.dims();
    out_ = dev_.alloc(qd, q.dtype(), Layout::bsnd, "out_heads");
    lse_ = dev_.alloc({qd.b, qd.s, qd.n, 1}, q.dtype(), Layout::bns, "lse_heads");  // [B, Nq/C, S]
    const Positions& pos = a2a_.group_positions();
    dev_.attention_forward(View(in_.q), pos, View(in_.k), View(in_.v), pos, View(out_), View(lse_),
                           {mask_, p_.scale, std::nullopt});
    // 2. Head sharding -> sequence sharding.
    comm_.recorder().step(2);
    return LocalOutput{a2a_.heads_to_seq(out_, "out"), lse_, comm_.rank() * qd.n, pos};
  }

  LocalGrads backward(const Buffer& dout) override {
    const DType acc = p_.accum_dtype();
    // 0. dout to head sharding.
    comm_.recorder().step(0);
    const Buffer dout_h = a2a_.seq_to_heads(dout, "dout_heads");
    // 1. Local backward over the full sequence.
    comm_.recorder().step(1);
    Buffer dq = dev_.alloc(in_.q.dims(), acc, Layout::bsnd, "dq_heads");
    Buffer dk = dev_.alloc(in_.k.dims(), acc, Layout::bsnd, "dk_heads");
    Buffer dv = dev_.alloc(in_.v.dims(), acc, Layout::bsnd, "dv_heads");
    const Positions& pos = a2a_.group_positions();
    dev_.attention_backward(View(in_.q), pos, View(in_.k), View(in_.v), pos, View(out_), View(lse_), View(dout_h),
                            View(dq), View(dk), View(dv), {mask_, p_.scale, std::nullopt});
    // 2. Gradients back to sequence sharding (the KV replicas summed).
    comm_.recorder().step(2);
    return a2a_.grads_to_seq(dq, dk, dv);
  }

 private:
  Communicator& comm_;
  Device& dev_;
  Problem p_;
  Mask mask_;
  HeadsExchange a2a_;
  HeadsExchange::Heads in_;  // q, k, v head-sharded, saved for backward with out_ and lse_
  Buffer out_, lse_;
};

}  // namespace

std::unique_ptr<Strategy> make_ulysses(Communicator& comm, Device& dev, const Problem& p) {
  return std::make_unique<UlyssesStrategy>(comm, dev, p);
}

}  // namespace cpsim
