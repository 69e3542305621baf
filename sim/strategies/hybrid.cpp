// A2A + P2P context parallelism on a 2-D mesh C = A x R, forward and backward.
//
// Ranks form R groups of A consecutive ranks (the A2A groups) and A rings of R ranks with stride A:
//   C=8, A=2, R=4: A2A groups [0,1] [2,3] [4,5] [6,7]; rings [0,2,4,6] [1,3,5,7].
// Forward on rank r (A2A group g = r / A, member a = r % A), marked as steps as Ulysses marks its own:
//   step 0         A2A q, k, v inside the group: [B, S/C, N, D] -> [B, S/R, N/A, D]. The group's rows are exactly
//                  the rows rank g owns in an R-rank layout (SeqLayout::grouped: with zigzag, chunks g and 2R-1-g of
//                  an A times coarser zigzag; with striped, stripes A tokens wide)
//   steps 1..R     ring attention over the R groups on that coarse layout, for this member's N/A heads
//   step R+1       A2A the output back: [B, S/R, N/A, D] -> [B, S/C, N, D]
// Backward: step 0 A2A dout, steps 1..R the ring backward, step R+1 A2A dq, dk, dv.
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
        p_(p),
        A_(p.a2a_size(StrategyKind::hybrid)),
        R_(p.ranks / A_),
        a2a_comm_(comm.split(comm.rank() / A_, comm.rank() % A_)),
        ring_comm_(comm.split(comm.rank() % A_, comm.rank() / A_)),
        fine_(p.layout()),
        a2a_(*a2a_comm_, dev, fine_, rank_range(comm.rank() / A_ * A_, A_), p.kv_heads,
             p.replicates_kv(StrategyKind::hybrid)),
        ring_(*ring_comm_, dev, fine_.grouped(A_), p.mask(), p.scale) {}

  LocalOutput forward(const Buffer& q, const Buffer& k, const Buffer& v) override {
    // 0. Inside the A2A group: sequence sharding -> head sharding.   [B, S/C, N, D] -> [B, S/R, N/A, D]
    comm_.recorder().step(0);
    const HeadsExchange::Heads in = a2a_.to_heads(q, k, v);
    // 1..R. The ring across groups on the coarse layout.
    Buffer out_h, lse_h;  // lse_h: [B, Nq/A, S/R]
    ring_.forward(in.q, in.k, in.v, out_h, lse_h, 1);
    // R+1. Back to sequence sharding.
    comm_.recorder().step(R_ + 1);
    return LocalOutput{a2a_.heads_to_seq(out_h, "out"), lse_h, a2a_.member() * in.q.dims().n, a2a_.group_positions()};
  }

  LocalGrads backward(const Buffer& dout) override {
    comm_.recorder().step(0);
    const Buffer dout_h = a2a_.seq_to_heads(dout, "dout_heads");
    Buffer dq, dk, dv;
    ring_.backward(dout_h, p_.accum_dtype(), dq, dk, dv, 1);
    comm_.recorder().step(R_ + 1);
    return a2a_.grads_to_seq(dq, dk, dv);
  }

 private:
  Communicator& comm_;
  Problem p_;
  int A_, R_;
  std::unique_ptr<Communicator> a2a_comm_, ring_comm_;
  SeqLayout fine_;  // the inputs' C-rank layout; the ring runs on fine_.grouped(A)
  HeadsExchange a2a_;
  RingAttention ring_;
};

}  // namespace

std::unique_ptr<Strategy> make_hybrid(Communicator& comm, Device& dev, const Problem& p) {
  return std::make_unique<HybridStrategy>(comm, dev, p);
}

}  // namespace cpsim
