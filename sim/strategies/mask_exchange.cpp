// The mask exchange, forward and backward (mask_exchange.hpp).
#include "sim/strategies/mask_exchange.hpp"

#include <memory>
#include <vector>

#include "sim/layout/kv_need.hpp"
#include "sim/strategies/ring.hpp"

namespace cpsim {
namespace {

constexpr int kTagKv = 41, kTagDkv = 42;

class MaskExchange : public Strategy {
 public:
  MaskExchange(Communicator& comm, Device& dev, const Problem& p)
      : comm_(comm),
        dev_(dev),
        layout_(p.layout()),
        mask_(p.mask()),
        scale_(p.scale),
        accum_(p.accum_dtype()),
        rank_(comm.rank()),
        C_(comm.size()) {
    // The rows of each stage: received from r - j (what this rank sees of it), sent to r + j (what it sees of us).
    const std::vector<Span> seen = visible_key_spans(layout_, rank_, mask_);
    recv_.resize(static_cast<std::size_t>(C_));
    send_.resize(static_cast<std::size_t>(C_));
    for (int j = 1; j < C_; ++j) {
      recv_[static_cast<std::size_t>(j)] = needed_rows(layout_, seen, at(rank_ - j));
      send_[static_cast<std::size_t>(j)] = needed_rows(layout_, at(rank_ + j), rank_, mask_);
    }
  }

  LocalOutput forward(const Buffer& q, const Buffer& k, const Buffer& v) override {
    const Dims qd = q.dims();  // q: [B, s, Nq, D]
    B_ = qd.b;
    q_ = q, k_ = k, v_ = v;
    LocalOutput o;
    o.out = dev_.alloc(qd, q.dtype(), Layout::bsnd, "out");
    o.lse = dev_.alloc({qd.b, qd.s, qd.n, 1}, q.dtype(), Layout::bns, "lse");  // [B, Nq, s]
    Buffer tile_out, tile_lse;
    if (C_ > 1) {
      tile_out = dev_.alloc(qd, q.dtype(), Layout::bsnd, "tile_out");
      tile_lse = dev_.alloc(o.lse.dims(), q.dtype(), Layout::bns, "tile_lse");
    }
    Stage cur, nxt = post(1);  // stage 1 arrives while the diagonal is computed
    for (int j = 0; j < C_; ++j) {
      comm_.recorder().step(j);
      // 1. Post the next stage before computing this one, and wait for this one (posted a stage ago).
      if (j >= 1) {
        cur = std::move(nxt);
        nxt = post(j + 1);
        cur.wait();
      }
      // 2. This stage's rows: the diagonal at stage 0, else what came from r - j.
      if (j == 0) {
        diagonal_forward(o.out, o.lse);
      } else if (!cur.kv.valid()) {
        dev_.record_skip(layout_.positions(rank_), Positions(), "attention_forward");
      } else {
        const Positions& kp = recv_[static_cast<std::size_t>(j)].positions;
        const SeeingRows r = rows_seeing(layout_.positions(rank_), kp, mask_);
        const std::int64_t nk = kp.size();
        const Positions qp = slice(layout_.positions(rank_), r.first, r.count);
        const AttentionOptions opt{mask_, scale_, kind(qp, kp)};
        const View to = View(tile_out).rows(r.first, r.count), tl = View(tile_lse).rows(r.first, r.count);
        dev_.attention_forward(View(q_).rows(r.first, r.count), qp, View(cur.kv).batches(0, B_).rows(0, nk),
                               View(cur.kv).batches(B_, B_).rows(0, nk), kp, to, tl, opt);
        dev_.merge(View(o.out).rows(r.first, r.count), View(o.lse).rows(r.first, r.count), to, tl);
      }
    }
    out_ = o.out;
    lse_ = o.lse;
    o.lse_positions = layout_.positions(rank_);
    return o;
  }

  LocalGrads backward(const Buffer& dout) override {
    const Dims kd = k_.dims();  // [B, s, Nkv, D]
    const std::int64_t B = B_;
    LocalGrads g;
    g.dq = dev_.alloc(q_.dims(), accum_, Layout::bsnd, "dq");
    g.dk = dev_.alloc(kd, accum_, Layout::bsnd, "dk");
    g.dv = dev_.alloc(kd, accum_, Layout::bsnd, "dv");
    Stage cur, nxt = post(1);
    Return back, back_prev;  // this stage's dK/dV partial sums going home, and the previous stage's
    for (int j = 0; j < C_; ++j) {
      comm_.recorder().step(j);
      // 1. The next stage's K/V, and the partial sums of our rows that r + j computes at this stage.
      if (j >= 1) {
        cur = std::move(nxt);
        nxt = post(j + 1);
      }
      back = Return{};
      const NeededRows& mine = send_[static_cast<std::size_t>(j)];
      if (j >= 1 && mine.count > 0) {
        back.in = dev_.alloc({2 * B, mine.count, kd.n, kd.d}, accum_, Layout::bsnd, "dkv_in", BufferUse::message);
        back.recv = comm_.irecv(back.in.data(), back.in.bytes(), at(rank_ + j), kTagDkv);
        back.stage = j;
      }
      if (j >= 1) cur.wait();
      // 2. The block: dQ stays; dK/dV of the diagonal into our own, of stage j into a buffer that goes back to r - j.
      if (j == 0) {
        diagonal_backward(dout, g);
      } else if (!cur.kv.valid()) {
        dev_.record_skip(layout_.positions(rank_), Positions(), "attention_backward");
      } else {
        const Positions& kp = recv_[static_cast<std::size_t>(j)].positions;
        const SeeingRows r = rows_seeing(layout_.positions(rank_), kp, mask_);
        const std::int64_t nk = kp.size();
        const Positions qp = slice(layout_.positions(rank_), r.first, r.count);
        back.out = dev_.alloc(cur.kv.dims(), accum_, Layout::bsnd, "dkv_out", BufferUse::message);
        const auto rows = [&](const Buffer& x) { return View(x).rows(r.first, r.count); };
        dev_.attention_backward(rows(q_), qp, View(cur.kv).batches(0, B).rows(0, nk),
                                View(cur.kv).batches(B, B).rows(0, nk), kp, rows(out_), rows(lse_), rows(dout),
                                rows(g.dq), View(back.out).batches(0, B), View(back.out).batches(B, B),
                                {mask_, scale_, kind(qp, kp)});
        back.send = comm_.isend(back.out.data(), back.out.bytes(), at(rank_ - j), kTagDkv);
      }
      // 3. The previous stage's partial sums, received while this stage computed: add them into our rows.
      settle(back_prev, g);
      back_prev = std::move(back);
    }
    settle(back_prev, g);
    return g;
  }

 private:
  // One stage's K/V: the packed rows sent (and the request), the rows received into kv.
  struct Stage {
    Buffer sent, kv;
    Request send, recv;
    void wait() {
      send.wait();
      recv.wait();
    }
  };
  // One stage's dK/dV partial sums: `out` going back to the owner, `in` coming home for our rows of send_[stage].
  struct Return {
    Buffer out, in;
    Request send, recv;
    int stage = 0;
  };

  int at(int r) const { return ((r % C_) + C_) % C_; }

  BlockKind kind(const Positions& q, const Positions& k) const {
    return visible_pairs(q, k, mask_) == q.size() * k.size() ? BlockKind::full : BlockKind::partial;
  }

  // Packs the rows r + j needs of us into one message and sends it; receives the rows we need of r - j.
  Stage post(int j) {
    Stage s;
    if (j >= C_) return s;
    const Dims kd = k_.dims();
    const NeededRows& out = send_[static_cast<std::size_t>(j)];
    const NeededRows& in = recv_[static_cast<std::size_t>(j)];
    if (out.count > 0) {
      s.sent = dev_.alloc({2 * B_, out.count, kd.n, kd.d}, k_.dtype(), Layout::bsnd, "kv_send", BufferUse::message);
      std::int64_t row = 0;
      for (const Span& r : out.rows) {
        const std::int64_t n = r.hi - r.lo;
        dev_.copy(View(s.sent).batches(0, B_).rows(row, n), View(k_).rows(r.lo, n));
        dev_.copy(View(s.sent).batches(B_, B_).rows(row, n), View(v_).rows(r.lo, n));
        row += n;
      }
      s.send = comm_.isend(s.sent.data(), s.sent.bytes(), at(rank_ + j), kTagKv);
    }
    if (in.count > 0) {
      s.kv = dev_.alloc({2 * B_, in.count, kd.n, kd.d}, k_.dtype(), Layout::bsnd, "kv_recv", BufferUse::message);
      s.recv = comm_.irecv(s.kv.data(), s.kv.bytes(), at(rank_ - j), kTagKv);
    }
    return s;
  }

  // Waits for a stage's returns and adds the partial sums that came home into dk, dv.
  void settle(Return& r, LocalGrads& g) {
    r.send.wait();
    r.recv.wait();
    if (!r.in.valid()) return;
    std::int64_t row = 0;
    for (const Span& s : send_[static_cast<std::size_t>(r.stage)].rows) {
      const std::int64_t n = s.hi - s.lo;
      dev_.add(View(g.dk).rows(s.lo, n), View(r.in).batches(0, B_).rows(row, n));
      dev_.add(View(g.dv).rows(s.lo, n), View(r.in).batches(B_, B_).rows(row, n));
      row += n;
    }
    r = Return{};
  }

  void diagonal_forward(const Buffer& out, const Buffer& lse) {
    const RingBlock b = visible_block(layout_, rank_, rank_, mask_);
    const Positions pos = layout_.positions(rank_);
    const Positions qp = slice(pos, b.q0, b.nq), kp = slice(pos, b.k0, b.nk);
    dev_.attention_forward(View(q_).rows(b.q0, b.nq), qp, View(k_).rows(b.k0, b.nk), View(v_).rows(b.k0, b.nk), kp,
                           View(out).rows(b.q0, b.nq), View(lse).rows(b.q0, b.nq), {mask_, scale_, b.kind});
  }

  void diagonal_backward(const Buffer& dout, LocalGrads& g) {
    const RingBlock b = visible_block(layout_, rank_, rank_, mask_);
    const Positions pos = layout_.positions(rank_);
    const auto rows = [&](const Buffer& x) { return View(x).rows(b.q0, b.nq); };
    const auto keys = [&](const Buffer& x) { return View(x).rows(b.k0, b.nk); };
    dev_.attention_backward(rows(q_), slice(pos, b.q0, b.nq), keys(k_), keys(v_), slice(pos, b.k0, b.nk), rows(out_),
                            rows(lse_), rows(dout), rows(g.dq), keys(g.dk), keys(g.dv), {mask_, scale_, b.kind});
  }

  Communicator& comm_;
  Device& dev_;
  SeqLayout layout_;
  Mask mask_;
  double scale_;
  DType accum_;
  int rank_, C_;
  std::vector<NeededRows> recv_, send_;  // per stage j: the rows received from r - j, sent to r + j
  // Saved by forward for backward (as autograd would): inputs and results.
  Buffer q_, k_, v_, out_, lse_;
  std::int64_t B_ = 0;
};

}  // namespace

std::unique_ptr<Strategy> make_mask_exchange(Communicator& comm, Device& dev, const Problem& p) {
  return std::make_unique<MaskExchange>(comm, dev, p);
}

}  // namespace cpsim
