// The pruned ring, forward and backward (the route: pruned_ring.hpp).
//
// Forward, rank r, step i = 0..M (M = the route's steps): at step i the rank holds the block of the clockwise owner
// r - i when i <= a(r - i) and of the counter-clockwise owner r + i when i <= b(r + i) (step 0: its own block).
//   1. post the next step's transfers before computing: the clockwise block on to r + 1 while i + 1 <= a(owner),
//      the next clockwise block from r - 1 when i + 1 <= a(r - i - 1); the same the other way
//   2. compute the visible block (ring.hpp) of Q x each block held and merge it by logaddexp (step 0 writes the
//      diagonal straight into out, lse); a rank that only passes a block on computes nothing with it
//   3. keep the block where its route ends (i == a(o)): the backward starts there
//   4. wait; the received blocks become the held ones
// A step with no block held and nothing sent is recorded as skipped.
//
// Backward mirrors the forward in time, as the plain ring's does: step j = 0..M holds distance d = M - j, so a
// block starts at the far end of its route (the block kept there) and travels back towards its owner, one hop per
// step, with the dK/dV accumulator of that owner beside it:
//   1. post the K/V for the next step (distance d - 1 >= 1) and the receive of this step's accumulator
//   2. compute the block: dQ stays, dK/dV into a fresh block buffer (at the route's end it is the accumulator)
//   3. wait for the accumulator from the rank further out, add the block to it, send it on towards the owner; that
//      send is waited after the next step's compute, so it hides behind it
// At d = 0 the rank computes its diagonal into its own dK/dV and adds the accumulators that came home.
// Bytes: forward sum_o (a(o) + b(o)) blocks; backward sum_o (a(o) + b(o) - [a>0] - [b>0]) K/V blocks (the far end
// kept its copy) and sum_o (a(o) + b(o)) dK/dV blocks.
#include "sim/strategies/pruned_ring.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "sim/layout/kv_need.hpp"
#include "sim/strategies/ring.hpp"

namespace cpsim {

namespace {

RingRoute compute_route(const SeqLayout& layout, const Mask& mask) {
  const int C = layout.ranks();
  // needs[r][o]: whether rank r needs a row of owner o.
  std::vector<std::vector<char>> needs(static_cast<std::size_t>(C));
  for (int r = 0; r < C; ++r) {
    const std::vector<Span> seen = visible_key_spans(layout, r, mask);
    needs[static_cast<std::size_t>(r)].assign(static_cast<std::size_t>(C), 0);
    for (int o = 0; o < C; ++o)
      if (o != r) needs[static_cast<std::size_t>(r)][static_cast<std::size_t>(o)] = needed_rows(layout, seen, o).count > 0;
  }
  RingRoute route;
  route.cw.assign(static_cast<std::size_t>(C), 0);
  route.ccw.assign(static_cast<std::size_t>(C), 0);
  for (int o = 0; o < C; ++o) {
    std::vector<int> d;  // clockwise distances of the ranks that need o, ascending
    for (int k = 1; k < C; ++k)
      if (needs[static_cast<std::size_t>((o + k) % C)][static_cast<std::size_t>(o)]) d.push_back(k);
    int best = C + 1, a = 0, b = 0;
    for (std::size_t k = 0; k <= d.size(); ++k) {  // clockwise to d[k-1], the other way to d[k]
      const int ca = k == 0 ? 0 : d[k - 1], cb = k == d.size() ? 0 : C - d[k];
      if (ca + cb <= best) best = ca + cb, a = ca, b = cb;
    }
    route.cw[static_cast<std::size_t>(o)] = a;
    route.ccw[static_cast<std::size_t>(o)] = b;
    route.steps = std::max({route.steps, a, b});
  }
  return route;
}

}  // namespace

// Every rank of a run asks for the same route: O(C^2) needs each. The last route is kept, keyed by what makes it
// (the layout's description names the sharding and its chunks; the mask holds the documents and the window).
RingRoute ring_route(const SeqLayout& layout, const Mask& mask) {
  struct Last {
    std::string layout;
    std::int64_t seq = -1;
    int ranks = -1;
    Mask mask;
    RingRoute route;
  };
  static std::mutex lock;
  static Last last;
  const std::string name = layout.describe();
  {
    const std::lock_guard<std::mutex> g(lock);
    if (last.layout == name && last.seq == layout.seq() && last.ranks == layout.ranks() && last.mask == mask)
      return last.route;
  }
  RingRoute route = compute_route(layout, mask);
  const std::lock_guard<std::mutex> g(lock);
  last = Last{name, layout.seq(), layout.ranks(), mask, route};
  return route;
}

std::int64_t RingRoute::blocks_received(int rank) const {
  const int C = static_cast<int>(cw.size());
  std::int64_t n = 0;
  for (int o = 0; o < C; ++o) {
    const int d = ((rank - o) % C + C) % C;  // clockwise distance from the owner
    n += d > 0 && (d <= cw[static_cast<std::size_t>(o)] || C - d <= ccw[static_cast<std::size_t>(o)]);
  }
  return n;
}

namespace {

constexpr int kTagCw = 31, kTagCcw = 32, kTagDkvCw = 33, kTagDkvCcw = 34;

class PrunedRing : public Strategy {
 public:
  PrunedRing(Communicator& comm, Device& dev, const Problem& p)
      : comm_(comm),
        dev_(dev),
        layout_(p.layout()),
        mask_(p.mask()),
        scale_(p.scale),
        accum_(p.accum_dtype()),
        rank_(comm.rank()),
        C_(comm.size()),
        route_(ring_route(layout_, mask_)) {}

  LocalOutput forward(const Buffer& q, const Buffer& k, const Buffer& v) override {
    const Dims qd = q.dims(), kd = k.dims();  // q: [B, s, Nq, D]   k, v: [B, s, Nkv, D]
    B_ = qd.b;
    q_ = q;
    const BufferUse travels = C_ > 1 ? BufferUse::message : BufferUse::work;
    own_ = dev_.alloc({2 * kd.b, kd.s, kd.n, kd.d}, k.dtype(), Layout::bsnd, "kv", travels);  // [2B, s, Nkv, D]
    dev_.copy(View(own_).batches(0, kd.b), View(k));
    dev_.copy(View(own_).batches(kd.b, kd.b), View(v));
    LocalOutput o;
    o.out = dev_.alloc(qd, q.dtype(), Layout::bsnd, "out");
    o.lse = dev_.alloc({qd.b, qd.s, qd.n, 1}, q.dtype(), Layout::bns, "lse");  // [B, Nq, s]
    Buffer tile_out, tile_lse;
    if (route_.steps > 0) {
      tile_out = dev_.alloc(qd, q.dtype(), Layout::bsnd, "tile_out");
      tile_lse = dev_.alloc(o.lse.dims(), q.dtype(), Layout::bns, "tile_lse");
    }
    const auto fresh = [&](Buffer& spare, const char* name) {  // a receive buffer: the spare one, else a new one
      Buffer b = spare.valid() ? spare : dev_.alloc(own_.dims(), own_.dtype(), Layout::bsnd, name, travels);
      spare = Buffer();
      return b;
    };
    Buffer cw = own_, ccw = own_, cw_next, ccw_next, spare_cw, spare_ccw;
    const int next = at(rank_ + 1), prev = at(rank_ - 1);
    for (int i = 0; i <= route_.steps; ++i) {
      comm_.recorder().step(i);
      const int o_cw = at(rank_ - i), o_ccw = at(rank_ + i);
      const bool has_cw = i == 0 || i <= a(o_cw), has_ccw = i > 0 && i <= b(o_ccw);
      // 1. The next step's transfers, before the compute.
      Request s_cw, r_cw, s_ccw, r_ccw;
      const bool gets_cw = i + 1 <= a(at(rank_ - i - 1)), gets_ccw = i + 1 <= b(at(rank_ + i + 1));
      if (has_cw && i + 1 <= a(o_cw)) s_cw = comm_.isend(cw.data(), cw.bytes(), next, kTagCw);
      if (gets_cw) {
        cw_next = fresh(spare_cw, "kv_cw");
        r_cw = comm_.irecv(cw_next.data(), cw_next.bytes(), prev, kTagCw);
      }
      if ((i == 0 || has_ccw) && i + 1 <= b(o_ccw)) s_ccw = comm_.isend(ccw.data(), ccw.bytes(), prev, kTagCcw);
      if (gets_ccw) {
        ccw_next = fresh(spare_ccw, "kv_ccw");
        r_ccw = comm_.irecv(ccw_next.data(), ccw_next.bytes(), next, kTagCcw);
      }
      // 2. Compute with what is held.
      if (i == 0) forward_block(rank_, own_, o.out, o.lse, tile_out, tile_lse, true);
      if (i > 0 && has_cw) forward_block(o_cw, cw, o.out, o.lse, tile_out, tile_lse, false);
      if (i > 0 && has_ccw) forward_block(o_ccw, ccw, o.out, o.lse, tile_out, tile_lse, false);
      if (i > 0 && !has_cw && !has_ccw && !s_cw.valid() && !gets_cw && !s_ccw.valid() && !gets_ccw)
        dev_.record_skip(Positions(), Positions(), "attention_forward");
      // 3. Keep the blocks whose route ends here.
      if (i > 0 && has_cw && i == a(o_cw)) kept_cw_[o_cw] = cw;
      if (i > 0 && has_ccw && i == b(o_ccw)) kept_ccw_[o_ccw] = ccw;
      // 4. Wait, and hold what came.
      s_cw.wait(), r_cw.wait(), s_ccw.wait(), r_ccw.wait();
      if (i > 0 && has_cw && i != a(o_cw)) spare_cw = cw;
      if (i > 0 && has_ccw && i != b(o_ccw)) spare_ccw = ccw;
      cw = gets_cw ? cw_next : Buffer();
      ccw = gets_ccw ? ccw_next : Buffer();
      cw_next = ccw_next = Buffer();
    }
    out_ = o.out;
    lse_ = o.lse;
    o.lse_positions = layout_.positions(rank_);
    return o;
  }

  LocalGrads backward(const Buffer& dout) override {
    const Dims kvd = own_.dims();  // [2B, s, Nkv, D]
    const std::int64_t B = B_;
    const BufferUse travels = C_ > 1 ? BufferUse::message : BufferUse::work;
    LocalGrads g;
    g.dq = dev_.alloc(q_.dims(), accum_, Layout::bsnd, "dq");
    Buffer home = dev_.alloc(kvd, accum_, Layout::bsnd, "dkv");  // this rank's dK (batches [0,B)) and dV ([B,2B))
    const auto alloc_kv = [&](const char* name) { return dev_.alloc(kvd, own_.dtype(), Layout::bsnd, name, travels); };
    const auto alloc_acc = [&](const char* name) { return dev_.alloc(kvd, accum_, Layout::bsnd, name, travels); };
    const int M = route_.steps, next = at(rank_ + 1), prev = at(rank_ - 1);
    // One direction's state: the K/V held this step and the one coming for the next, and the accumulator sends
    // still in flight (waited after the next step's compute).
    // Buffers are reused once free: a K/V block after its step (kv_spare), an accumulator once its send completed
    // (acc_spare), and one scratch buffer for a block's dK/dV, of which only the block's rows are zeroed and added.
    struct Way {
      Buffer kv, kv_next, kv_spare;
      Request kv_send, kv_recv, acc_send;
      bool gets_kv = false;  // kv_next is coming for the next step
      Buffer acc_sent, acc_spare, scratch;
    } ways[2];
    const auto take = [](Buffer& spare, const auto& make) {
      Buffer b = spare.valid() ? spare : make();
      spare = Buffer();
      return b;
    };
    const int sign[2] = {-1, +1};             // way 0: clockwise blocks (owner r - d), way 1: counter-clockwise (r + d)
    const int toward[2] = {prev, next};       // towards the owner
    const int from[2] = {next, prev};         // from further out
    const int kv_tag[2] = {kTagCw, kTagCcw}, acc_tag[2] = {kTagDkvCw, kTagDkvCcw};
    const auto hops = [&](int w, int owner) { return w == 0 ? a(owner) : b(owner); };
    for (int j = 0; j <= M; ++j) {
      comm_.recorder().step(j);
      const int d = M - j;
      if (d == 0) {
        // The diagonal into this rank's own dK/dV, then the accumulators that came home.
        Request acc_recv[2];
        Buffer acc_in[2];
        for (int w = 0; w < 2; ++w)
          if (hops(w, rank_) >= 1) {
            acc_in[w] = alloc_acc("dkv_in");
            acc_recv[w] = comm_.irecv(acc_in[w].data(), acc_in[w].bytes(), from[w], acc_tag[w]);
          }
        backward_block(rank_, own_, dout, g.dq, home);
        for (int w = 0; w < 2; ++w) {
          ways[w].acc_send.wait();
          acc_recv[w].wait();
          if (acc_in[w].valid()) dev_.add(View(home), View(acc_in[w]));
        }
        break;
      }
      bool any = false;
      Buffer acc_in[2];
      Request acc_recv[2];
      for (int w = 0; w < 2; ++w) {
        Way& way = ways[w];
        const int o = at(rank_ + sign[w] * d), o_next = at(rank_ + sign[w] * (d - 1));
        const bool part = d <= hops(w, o);
        if (part && d == hops(w, o)) way.kv = (w == 0 ? kept_cw_ : kept_ccw_).at(o);
        // 1. The next step's K/V, and this step's accumulator from further out.
        if (part && d >= 2) way.kv_send = comm_.isend(way.kv.data(), way.kv.bytes(), toward[w], kv_tag[w]);
        way.gets_kv = d - 1 >= 1 && d - 1 < hops(w, o_next);
        if (way.gets_kv) {
          way.kv_next = take(way.kv_spare, [&] { return alloc_kv("kv_next"); });
          way.kv_recv = comm_.irecv(way.kv_next.data(), way.kv_next.bytes(), from[w], kv_tag[w]);
        }
        if (part && d < hops(w, o)) {
          acc_in[w] = take(way.acc_spare, [&] { return alloc_acc("dkv_in"); });
          acc_recv[w] = comm_.irecv(acc_in[w].data(), acc_in[w].bytes(), from[w], acc_tag[w]);
        }
        any = any || part || way.kv_send.valid() || way.gets_kv;
      }
      for (int w = 0; w < 2; ++w) {
        Way& way = ways[w];
        const int o = at(rank_ + sign[w] * d);
        if (d > hops(w, o)) continue;
        // 2. The block's dK/dV: at the route's end straight into a zeroed accumulator, else into the scratch buffer
        //    (its block rows zeroed first) while the accumulator from further out is still in flight.
        const RingBlock b = visible_block(layout_, rank_, o, mask_);
        const bool starts = !acc_in[w].valid();
        Buffer acc;
        if (starts) {
          acc = take(way.acc_spare, [&] { return alloc_acc("dkv"); });
          dev_.fill(View(acc), 0.0);
        } else if (!way.scratch.valid()) {
          way.scratch = dev_.alloc(kvd, accum_, Layout::bsnd, "dkv_block");
        }
        const Buffer& block = starts ? acc : way.scratch;
        if (!starts && b.kind != BlockKind::skipped) dev_.fill(View(block).rows(b.k0, b.nk), 0.0);
        backward_block(o, way.kv, dout, g.dq, block);
        // 3. Add it to the accumulator from further out and send that on towards the owner; the accumulator sent a
        //    step ago is free again.
        way.acc_send.wait();
        way.acc_spare = way.acc_sent;
        if (!starts) {
          acc_recv[w].wait();
          if (b.kind != BlockKind::skipped) dev_.add(View(acc_in[w]).rows(b.k0, b.nk), View(block).rows(b.k0, b.nk));
          acc = acc_in[w];
        }
        way.acc_send = comm_.isend(acc.data(), acc.bytes(), toward[w], acc_tag[w]);
        way.acc_sent = acc;
      }
      if (!any) dev_.record_skip(Positions(), Positions(), "attention_backward");
      for (Way& way : ways) {
        way.kv_send.wait(), way.kv_recv.wait();
        way.kv_spare = way.kv;
        way.kv = way.gets_kv ? way.kv_next : Buffer();
        way.kv_next = Buffer();
        way.kv_send = Request();
        way.kv_recv = Request();
      }
    }
    kept_cw_.clear();
    kept_ccw_.clear();
    // Unpack: dk = batches [0,B), dv = batches [B,2B).
    g.dk = dev_.alloc({B, kvd.s, kvd.n, kvd.d}, accum_, Layout::bsnd, "dk");
    g.dv = dev_.alloc({B, kvd.s, kvd.n, kvd.d}, accum_, Layout::bsnd, "dv");
    dev_.copy(View(g.dk), View(home).batches(0, B));
    dev_.copy(View(g.dv), View(home).batches(B, B));
    return g;
  }

 private:
  int at(int r) const { return ((r % C_) + C_) % C_; }
  int a(int owner) const { return route_.cw[static_cast<std::size_t>(owner)]; }
  int b(int owner) const { return route_.ccw[static_cast<std::size_t>(owner)]; }

  // The visible block of Q x KV(owner) (ring.hpp), merged into (out, lse); the diagonal (first) straight into them.
  void forward_block(int owner, const Buffer& kv, const Buffer& out, const Buffer& lse, const Buffer& tile_out,
                     const Buffer& tile_lse, bool first) {
    const Positions q_pos = layout_.positions(rank_), k_pos = layout_.positions(owner);
    const RingBlock b = visible_block(layout_, rank_, owner, mask_);
    if (b.kind == BlockKind::skipped) return dev_.record_skip(q_pos, k_pos, "attention_forward");
    const View q = View(q_).rows(b.q0, b.nq), k = View(kv).batches(0, B_).rows(b.k0, b.nk),
               v = View(kv).batches(B_, B_).rows(b.k0, b.nk);
    const Positions qp = slice(q_pos, b.q0, b.nq), kp = slice(k_pos, b.k0, b.nk);
    const AttentionOptions opt{mask_, scale_, b.kind};
    if (first) {
      dev_.attention_forward(q, qp, k, v, kp, View(out).rows(b.q0, b.nq), View(lse).rows(b.q0, b.nq), opt);
      return;
    }
    const View to = View(tile_out).rows(b.q0, b.nq), tl = View(tile_lse).rows(b.q0, b.nq);
    dev_.attention_forward(q, qp, k, v, kp, to, tl, opt);
    dev_.merge(View(out).rows(b.q0, b.nq), View(lse).rows(b.q0, b.nq), to, tl);
  }

  // dQ added into dq, the block's dK/dV added into dkv ([2B, s, Nkv, D] of the owner's rows).
  void backward_block(int owner, const Buffer& kv, const Buffer& dout, const Buffer& dq, const Buffer& dkv) {
    const Positions q_pos = layout_.positions(rank_), k_pos = layout_.positions(owner);
    const RingBlock b = visible_block(layout_, rank_, owner, mask_);
    if (b.kind == BlockKind::skipped) return dev_.record_skip(q_pos, k_pos, "attention_backward");
    const std::int64_t B = B_;
    const View k = View(kv).batches(0, B).rows(b.k0, b.nk), v = View(kv).batches(B, B).rows(b.k0, b.nk);
    const View dk = View(dkv).batches(0, B).rows(b.k0, b.nk), dv = View(dkv).batches(B, B).rows(b.k0, b.nk);
    const auto rows = [&](const Buffer& x) { return View(x).rows(b.q0, b.nq); };
    dev_.attention_backward(rows(q_), slice(q_pos, b.q0, b.nq), k, v, slice(k_pos, b.k0, b.nk), rows(out_),
                            rows(lse_), rows(dout), rows(dq), dk, dv, {mask_, scale_, b.kind});
  }

  Communicator& comm_;
  Device& dev_;
  SeqLayout layout_;
  Mask mask_;
  double scale_;
  DType accum_;
  int rank_, C_;
  RingRoute route_;
  // Saved by forward for backward: inputs, results, this rank's packed K/V, and the blocks whose routes end here.
  Buffer q_, out_, lse_, own_;
  std::map<int, Buffer> kept_cw_, kept_ccw_;
  std::int64_t B_ = 0;
};

}  // namespace

std::unique_ptr<Strategy> make_pruned_ring(Communicator& comm, Device& dev, const Problem& p) {
  return std::make_unique<PrunedRing>(comm, dev, p);
}

}  // namespace cpsim
