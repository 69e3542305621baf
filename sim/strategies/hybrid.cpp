// A2A + P2P context parallelism on a 2-D mesh C = A x R, forward and backward.
//
// Ranks form R groups of A consecutive ranks (the A2A groups) and A rings of R ranks with stride A:
//   C=8, A=2, R=4: A2A groups [0,1] [2,3] [4,5] [6,7]; rings [0,2,4,6] [1,3,5,7].
// Forward on rank r (A2A group g = r / A, member a = r % A):
//   1. A2A q, k, v inside the group: [B, S/C, N, D] -> [B, S/R, N/A, D]. The group's rows are exactly the
//      rows rank g owns in an R-rank layout (with zigzag: chunks g and 2R-1-g of an A times coarser zigzag)
//   2. ring attention over the R groups on that coarse layout, for this member's N/A heads
//   3. A2A the output back: [B, S/R, N/A, D] -> [B, S/C, N, D]
// Backward: A2A dout, ring backward, A2A dq, dk, dv.
// Communication: the A2A counts of Ulysses inside a group of A, plus R-1 K/V exchanges forward
// (R-1 K/V and R-1 dK/dV backward) around the ring.
#include <memory>

#include "sim/strategies/heads_exchange.hpp"
#include "sim/strategies/ring.hpp"
#include "sim/strategies/strategy.hpp"

namespace cpsim {
namespace {

class HybridStrategy : public Strategy {
 public:
  HybridStrategy(Communicator& comm, Device& dev, const Problem& p)
      : comm_(comm),
        dev_(dev),
        p_(p),
        A_(p.a2a_size(StrategyKind::hybrid)),
        R_(p.ranks / A_),
        a2a_comm_(comm.split(comm.rank() / A_, comm.rank() % A_)),
        ring_comm_(comm.split(comm.rank() % A_, comm.rank() / A_)),
        a2a_(*a2a_comm_, dev, SeqLayout(p.ranks, p.seq, p.sharding), members()),
        ring_(*ring_comm_, dev, SeqLayout(R_, p.seq, p.sharding), p.causal, p.scale),
        replicate_(p.kv_heads % A_ != 0) {}

  LocalOutput forward(const Buffer& q, const Buffer& k, const Buffer& v) override {
    // 1. Inside the A2A group: sequence sharding -> head sharding.   [B, S/C, N, D] -> [B, S/R, N/A, D]
    const Buffer qh = a2a_.seq_to_heads(q, "q_heads");
    const Buffer kh = a2a_.seq_to_heads(replicate_ ? replicate_kv_heads(dev_, k, A_, "k_rep") : k, "k_heads");
    const Buffer vh = a2a_.seq_to_heads(replicate_ ? replicate_kv_heads(dev_, v, A_, "v_rep") : v, "v_heads");
    // 2. The ring across groups on the coarse layout.
    Buffer out_h, lse_h;
    ring_.forward(qh, kh, vh, out_h, lse_h);
    // 3. Back to sequence sharding.
    LocalOutput o;
    o.out = a2a_.heads_to_seq(out_h, "out");
    o.lse = lse_h;  // [B, Nq/A, S/R]
    o.lse_head0 = (comm_.rank() % A_) * qh.dims().n;
    o.lse_positions = a2a_.group_positions();
    return o;
  }

  LocalGrads backward(const Buffer& dout) override {
    const Buffer dout_h = a2a_.seq_to_heads(dout, "dout_heads");
    Buffer dq, dk, dv;
    ring_.backward(dout_h, p_.accum_dtype(), dq, dk, dv);
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
  std::vector<int> members() const {  // ranks of this rank's A2A group, in group order
    std::vector<int> m;
    for (int a = 0; a < A_; ++a) m.push_back((comm_.rank() / A_) * A_ + a);
    return m;
  }

  Communicator& comm_;
  Device& dev_;
  Problem p_;
  int A_, R_;
  std::unique_ptr<Communicator> a2a_comm_, ring_comm_;
  HeadsExchange a2a_;
  RingAttention ring_;
  bool replicate_;
};

}  // namespace

std::unique_ptr<Strategy> make_hybrid(Communicator& comm, Device& dev, const Problem& p) {
  return std::make_unique<HybridStrategy>(comm, dev, p);
}

}  // namespace cpsim
