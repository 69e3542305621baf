// K/V all-gather context parallelism, forward and backward.
//
// Forward (rank r, local rows = its chunks in ascending order):
//   1. all-gather k and v: [B, s, Nkv, D] -> [C][B, s, Nkv, D] in rank order
//   2. reorder rank order -> sequence order: [B, S, Nkv, D] (zigzag C=4 gathers chunks 0,7,1,6,2,5,3,4)
//   3. each local Q chunk c attends to the K/V prefix that ends with it, [0, end of c): the mask is aligned
//      bottom-right, so the result is final and no merge is needed
// Backward:
//   1. re-gather and reorder k and v (the forward did not keep the full copies)
//   2. each local Q chunk accumulates partial dK/dV over its prefix into full-sequence buffers [B, S, Nkv, D];
//      dQ is complete locally (a query only ever ran on its owner)
//   3. reorder the partial dK/dV into rank order and reduce-scatter them: rank r receives the sum of every
//      rank's contribution to its own rows
// Communication: forward 2 all-gathers; backward 2 all-gathers + 2 reduce-scatters. Memory: every rank holds
// full-length K and V (and full-length partial dK/dV in backward): O(S), not O(S/C).
#include <memory>

#include "sim/strategies/strategy.hpp"

namespace cpsim {
namespace {

class AllGatherStrategy : public Strategy {
 public:
  AllGatherStrategy(Communicator& comm, Device& dev, const Problem& p)
      : comm_(comm), dev_(dev), p_(p), layout_(p.ranks, p.seq, p.sharding) {}

  LocalOutput forward(const Buffer& q, const Buffer& k, const Buffer& v) override {
    q_ = q;
    k_ = k;
    v_ = v;
    comm_.recorder().step(0);
    const Buffer k_full = gather_in_sequence_order(k, "k_full"), v_full = gather_in_sequence_order(v, "v_full");
    comm_.recorder().step(1);
    LocalOutput o;
    o.out = dev_.alloc(q.dims(), q.dtype(), Layout::bsnd, "out");
    o.lse = dev_.alloc({q.dims().b, q.dims().s, q.dims().n, 1}, q.dtype(), Layout::bns, "lse");  // [B, Nq, s]
    o.lse_positions = layout_.positions(comm_.rank());
    for (const Chunk& c : local_chunks()) {
      const AttentionOptions opt{p_.causal, p_.scale, std::nullopt};
      const std::int64_t nk = p_.causal ? c.span.hi : p_.seq;  // the visible prefix
      dev_.attention_forward(View(q).rows(c.row, c.len()), c.positions, View(k_full).rows(0, nk),
                             View(v_full).rows(0, nk), iota_positions(0, nk), View(o.out).rows(c.row, c.len()),
                             View(o.lse).rows(c.row, c.len()), opt);
    }
    out_ = o.out;
    lse_ = o.lse;
    return o;
  }

  LocalGrads backward(const Buffer& dout) override {
    const DType acc = p_.accum_dtype();
    const Dims kd = k_.dims();
    comm_.recorder().step(0);
    const Buffer k_full = gather_in_sequence_order(k_, "k_full"), v_full = gather_in_sequence_order(v_, "v_full");
    comm_.recorder().step(1);
    LocalGrads g;
    g.dq = dev_.alloc(q_.dims(), acc, Layout::bsnd, "dq");
    Buffer dk_full = dev_.alloc({kd.b, p_.seq, kd.n, kd.d}, acc, Layout::bsnd, "dk_full");  // partial, [B, S, Nkv, D]
    Buffer dv_full = dev_.alloc(dk_full.dims(), acc, Layout::bsnd, "dv_full");
    for (const Chunk& c : local_chunks()) {
      const AttentionOptions opt{p_.causal, p_.scale, std::nullopt};
      const std::int64_t nk = p_.causal ? c.span.hi : p_.seq;
      const auto rows = [&](const Buffer& b) { return View(b).rows(c.row, c.len()); };
      dev_.attention_backward(rows(q_), c.positions, View(k_full).rows(0, nk), View(v_full).rows(0, nk),
                              iota_positions(0, nk), rows(out_), rows(lse_), rows(dout), rows(g.dq),
                              View(dk_full).rows(0, nk), View(dv_full).rows(0, nk), opt);
    }
    comm_.recorder().step(2);
    g.dk = reduce_scatter_from_sequence_order(dk_full, "dk");
    g.dv = reduce_scatter_from_sequence_order(dv_full, "dv");
    return g;
  }

 private:
  struct Chunk {
    Span span;               // global positions [lo, hi)
    std::int64_t row = 0;    // first local row
    Positions positions;
    std::int64_t len() const { return span.hi - span.lo; }
  };

  std::vector<Chunk> local_chunks() const {
    std::vector<Chunk> out;
    std::int64_t row = 0;
    for (const Span& sp : layout_.spans(comm_.rank())) {
      out.push_back(Chunk{sp, row, iota_positions(sp.lo, sp.hi - sp.lo)});
      row += sp.hi - sp.lo;
    }
    return out;
  }

  // x: [B, s, N, D] on every rank -> [B, S, N, D] in sequence order.
  Buffer gather_in_sequence_order(const Buffer& x, const std::string& name) {
    const Dims d = x.dims();
    const int C = comm_.size();
    Buffer gathered = dev_.alloc({C * d.b, d.s, d.n, d.d}, x.dtype(), Layout::bsnd, name + ".rank_order");
    comm_.all_gather(x.data(), gathered.data(), x.bytes());
    Buffer full = dev_.alloc({d.b, p_.seq, d.n, d.d}, x.dtype(), Layout::bsnd, name);
    for (int r = 0; r < C; ++r) {  // rank r's rows go to its positions
      std::int64_t row = 0;
      for (const Span& sp : layout_.spans(r)) {
        dev_.copy(View(full).rows(sp.lo, sp.hi - sp.lo), View(gathered).batches(r * d.b, d.b).rows(row, sp.hi - sp.lo));
        row += sp.hi - sp.lo;
      }
    }
    return full;
  }

  // partial: [B, S, N, D] in sequence order -> rank order [C][B, s, N, D] -> reduce-scatter -> [B, s, N, D].
  Buffer reduce_scatter_from_sequence_order(const Buffer& partial, const std::string& name) {
    const Dims d = partial.dims();
    const int C = comm_.size();
    const std::int64_t s = layout_.local_len();
    Buffer rank_order = dev_.alloc({C * d.b, s, d.n, d.d}, partial.dtype(), Layout::bsnd, name + ".rank_order");
    for (int r = 0; r < C; ++r) {
      std::int64_t row = 0;
      for (const Span& sp : layout_.spans(r)) {
        dev_.copy(View(rank_order).batches(r * d.b, d.b).rows(row, sp.hi - sp.lo), View(partial).rows(sp.lo, sp.hi - sp.lo));
        row += sp.hi - sp.lo;
      }
    }
    Buffer mine = dev_.alloc({d.b, s, d.n, d.d}, partial.dtype(), Layout::bsnd, name);
    comm_.reduce_scatter(rank_order.data(), mine.data(), static_cast<std::size_t>(mine.numel()), partial.dtype());
    return mine;
  }

  Communicator& comm_;
  Device& dev_;
  Problem p_;
  SeqLayout layout_;
  Buffer q_, k_, v_, out_, lse_;  // saved for backward
};

}  // namespace

std::unique_ptr<Strategy> make_all_gather(Communicator& comm, Device& dev, const Problem& p) {
  return std::make_unique<AllGatherStrategy>(comm, dev, p);
}

}  // namespace cpsim
