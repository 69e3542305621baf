// K/V all-gather context parallelism, forward and backward.
//
// Forward (rank r, local rows = its chunks in ascending order):
//   1. all-gather k and v: [B, s, Nkv, D] -> [C][B, s, Nkv, D] in rank order
//   2. reorder rank order -> sequence order: [B, S, Nkv, D] (zigzag C=4 gathers chunks 0,7,1,6,2,5,3,4)
//   3. each local run of Q rows attends to the K/V range its rows can see, [lo(first row), hi(last row)] (causal:
//      the prefix that ends with the run; mask.hpp), under the mask: the result is final and no merge is needed
// Backward:
//   1. re-gather and reorder k and v (the forward did not keep the full copies)
//   2. each local run of Q rows accumulates partial dK/dV over its key range into full-sequence buffers [B, S, Nkv, D];
//      dQ is complete locally (a query only ever ran on its owner)
//   3. reorder the partial dK/dV into rank order and reduce-scatter them: rank r receives the sum of every
//      rank's contribution to its own rows
// Communication: forward 2 all-gathers; backward 2 all-gathers + 2 reduce-scatters. Memory: every rank holds
// full-length K and V (and full-length partial dK/dV in backward): O(S), not O(S/C).
#include <algorithm>
#include <memory>

#include "sim/strategies/strategy.hpp"

namespace cpsim {
namespace {

class AllGatherStrategy : public Strategy {
 public:
  AllGatherStrategy(Communicator& comm, Device& dev, const Problem& p)
      : comm_(comm), dev_(dev), p_(p), mask_(p.mask()), layout_(p.layout()) {}

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
      const AttentionOptions opt{mask_, p_.scale, std::nullopt};
      dev_.attention_forward(View(q).rows(c.row, c.len()), c.positions, View(k_full).rows(c.k0, c.nk),
                             View(v_full).rows(c.k0, c.nk), iota_positions(c.k0, c.nk), View(o.out).rows(c.row, c.len()),
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
      const AttentionOptions opt{mask_, p_.scale, std::nullopt};
      const auto rows = [&](const Buffer& b) { return View(b).rows(c.row, c.len()); };
      const auto keys = [&](const Buffer& b) { return View(b).rows(c.k0, c.nk); };
      dev_.attention_backward(rows(q_), c.positions, keys(k_full), keys(v_full), iota_positions(c.k0, c.nk),
                              rows(out_), rows(lse_), rows(dout), rows(g.dq), keys(dk_full), keys(dv_full), opt);
    }
    comm_.recorder().step(2);
    g.dk = reduce_scatter_from_sequence_order(dk_full, "dk");
    g.dv = reduce_scatter_from_sequence_order(dv_full, "dv");
    return g;
  }

 private:
  struct Chunk {
    std::int64_t row = 0;     // first local row
    Positions positions;      // the rows' positions: one run (a chunk, or a striped rank's every C-th token)
    std::int64_t k0 = 0, nk = 0;  // the keys its rows can see: positions [k0, k0 + nk)
    std::int64_t len() const { return positions.size(); }
  };

  // One chunk per run of the rank's positions, with the key range its rows see: lo of its first row to hi of its
  // last (lo and hi never decrease), inside the sequence.
  std::vector<Chunk> local_chunks() const {
    std::vector<Chunk> out;
    std::int64_t row = 0;
    const Positions mine = layout_.positions(comm_.rank());
    for (const PosRun& run : mine.runs()) {
      Chunk c{row, Positions()};
      c.positions.append(run);
      c.k0 = std::max<std::int64_t>(0, mask_.lo(run.first));
      c.nk = std::min<std::int64_t>(p_.seq, mask_.hi(run.last()) + 1) - c.k0;
      out.push_back(std::move(c));
      row += run.count;
    }
    return out;
  }

  // x: [B, s, N, D] on every rank -> [B, S, N, D] in sequence order.
  Buffer gather_in_sequence_order(const Buffer& x, const std::string& name) {
    const Dims d = x.dims();
    const int C = comm_.size();
    Buffer gathered =
        dev_.alloc({C * d.b, d.s, d.n, d.d}, x.dtype(), Layout::bsnd, name + ".rank_order", message_use());
    comm_.all_gather(x.data(), gathered.data(), x.bytes());
    Buffer full = dev_.alloc({d.b, p_.seq, d.n, d.d}, x.dtype(), Layout::bsnd, name);
    for (int r = 0; r < C; ++r)  // rank r's rows go to its positions (striped: every C-th row)
      for_each_progression(layout_.positions(r), [&](std::int64_t row, std::int64_t first, std::int64_t n,
                                                     std::int64_t step) {
        dev_.copy(View(full).strided_rows(first, n, step), View(gathered).batches(r * d.b, d.b).rows(row, n));
      });
    return full;
  }

  // partial: [B, S, N, D] in sequence order -> rank order [C][B, s, N, D] -> reduce-scatter -> [B, s, N, D].
  Buffer reduce_scatter_from_sequence_order(const Buffer& partial, const std::string& name) {
    const Dims d = partial.dims();
    const int C = comm_.size();
    const std::int64_t s = layout_.local_len();
    Buffer rank_order =
        dev_.alloc({C * d.b, s, d.n, d.d}, partial.dtype(), Layout::bsnd, name + ".rank_order", message_use());
    for (int r = 0; r < C; ++r)
      for_each_progression(layout_.positions(r), [&](std::int64_t row, std::int64_t first, std::int64_t n,
                                                     std::int64_t step) {
        dev_.copy(View(rank_order).batches(r * d.b, d.b).rows(row, n), View(partial).strided_rows(first, n, step));
      });
    Buffer mine = dev_.alloc({d.b, s, d.n, d.d}, partial.dtype(), Layout::bsnd, name, message_use());
    comm_.reduce_scatter(rank_order.data(), mine.data(), static_cast<std::size_t>(mine.numel()), partial.dtype());
    return mine;
  }

  // The gathered and reduce-scattered buffers, sent and received as they are (strategy.hpp: kv_input_use).
  BufferUse message_use() const { return kv_input_use(StrategyKind::all_gather, comm_.size()); }

  Communicator& comm_;
  Device& dev_;
  Problem p_;
  Mask mask_;
  SeqLayout layout_;
  Buffer q_, k_, v_, out_, lse_;  // saved for backward
};

}  // namespace

std::unique_ptr<Strategy> make_all_gather(Communicator& comm, Device& dev, const Problem& p) {
  return std::make_unique<AllGatherStrategy>(comm, dev, p);
}

}  // namespace cpsim
