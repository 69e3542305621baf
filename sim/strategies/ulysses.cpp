// All-to-all (DeepSpeed-Ulysses) context parallelism, forward and backward.
//
// Outside attention the sequence is distributed; inside attention the heads are. Shapes on one rank:
//   forward   q, k, v in:          [B, S/C, N, D]
//             after the A2A:       [B, S, N/C, D]     (every position, N/C heads)
//             local attention out: [B, S, N/C, D]
//             after the inverse:   [B, S/C, N, D]
//   backward  dout in [B, S/C, N, D] -> A2A -> [B, S, N/C, D] -> local backward -> dq, dk, dv [B, S, N/C, D]
//             -> inverse A2A each -> [B, S/C, N, D]
// Steps (forward): 1. A2A q, k, v   2. causal attention over the full sequence for N/C heads   3. A2A out back.
// Steps (backward): 1. A2A dout   2. local attention backward   3. A2A dq, dk, dv back.
// Communication: 4 all-to-alls forward, 4 backward, each sending (C-1)/C of a rank's tensor.
// Limit: Nq % C == 0 and Nkv % C == 0. With --kv-replicate and C > Nkv, each KV head is first copied onto
// C/Nkv ranks ([B, s, Nkv, D] -> [B, s, C, D]), so the K and V all-to-alls carry C/Nkv times more bytes, and
// backward sums the replicas' dK/dV.
#include <memory>

#include "sim/strategies/heads_exchange.hpp"
#include "sim/strategies/strategy.hpp"

namespace cpsim {
namespace {

std::vector<int> first_ranks(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
  return v;
}

class UlyssesStrategy : public Strategy {
 public:
  UlyssesStrategy(Communicator& comm, Device& dev, const Problem& p)
      : comm_(comm), dev_(dev), p_(p), a2a_(comm, dev, SeqLayout(p.ranks, p.seq, p.sharding), first_ranks(p.ranks)),
        replicate_(p.kv_heads % p.ranks != 0) {}

  LocalOutput forward(const Buffer& q, const Buffer& k, const Buffer& v) override {
    const int C = comm_.size();
    // 1. Sequence sharding -> head sharding.
    comm_.recorder().step(0);
    q_ = a2a_.seq_to_heads(q, "q_heads");
    k_ = a2a_.seq_to_heads(replicate_ ? replicate_kv_heads(dev_, k, C, "k_rep") : k, "k_heads");
    v_ = a2a_.seq_to_heads(replicate_ ? replicate_kv_heads(dev_, v, C, "v_rep") : v, "v_heads");
    // 2. Ordinary attention over every position for this rank's heads.   q_: [B, S, Nq/C, D]
    comm_.recorder().step(1);
    const Dims qd = q_.dims();
    out_ = dev_.alloc(qd, q.dtype(), Layout::bsnd, "out_heads");
    lse_ = dev_.alloc({qd.b, qd.s, qd.n, 1}, q.dtype(), Layout::bns, "lse_heads");  // [B, Nq/C, S]
    const Positions& pos = a2a_.group_positions();
    dev_.attention_forward(View(q_), pos, View(k_), View(v_), pos, View(out_), View(lse_),
                           {p_.causal, p_.scale, std::nullopt});
    // 3. Head sharding -> sequence sharding.
    comm_.recorder().step(2);
    LocalOutput o;
    o.out = a2a_.heads_to_seq(out_, "out");
    o.lse = lse_;
    o.lse_head0 = comm_.rank() * qd.n;
    o.lse_positions = pos;
    return o;
  }

  LocalGrads backward(const Buffer& dout) override {
    const DType acc = p_.accum_dtype();
    // 1. dout to head sharding.
    comm_.recorder().step(0);
    const Buffer dout_h = a2a_.seq_to_heads(dout, "dout_heads");
    // 2. Local backward over the full sequence.
    comm_.recorder().step(1);
    Buffer dq = dev_.alloc(q_.dims(), acc, Layout::bsnd, "dq_heads");
    Buffer dk = dev_.alloc(k_.dims(), acc, Layout::bsnd, "dk_heads");
    Buffer dv = dev_.alloc(v_.dims(), acc, Layout::bsnd, "dv_heads");
    const Positions& pos = a2a_.group_positions();
    dev_.attention_backward(View(q_), pos, View(k_), View(v_), pos, View(out_), View(lse_), View(dout_h), View(dq),
                            View(dk), View(dv), {p_.causal, p_.scale, std::nullopt});
    // 3. Gradients back to sequence sharding (and the KV replicas summed).
    comm_.recorder().step(2);
    LocalGrads g;
    g.dq = a2a_.heads_to_seq(dq, "dq");
    g.dk = a2a_.heads_to_seq(dk, "dk");
    g.dv = a2a_.heads_to_seq(dv, "dv");
    if (replicate_) {
      g.dk = sum_kv_replicas(dev_, g.dk, p_.kv_heads, "dk");
      g.dv = sum_kv_replicas(dev_, g.dv, p_.kv_heads, "dv");
    }
    return g;
  }

 private:
  Communicator& comm_;
  Device& dev_;
  Problem p_;
  HeadsExchange a2a_;
  bool replicate_;
  Buffer q_, k_, v_, out_, lse_;  // head-sharded, saved for backward
};

}  // namespace

std::unique_ptr<Strategy> make_ulysses(Communicator& comm, Device& dev, const Problem& p) {
  return std::make_unique<UlyssesStrategy>(comm, dev, p);
}

}  // namespace cpsim
