// Pass-Q prefill: K/V stay where they are, Q travels (inference.hpp).
//
// Rank r of C, step i = 0..C-1, holding the Q of owner o = (r - i) mod C:
//   1. qt: [B, n, Nq, D], the travelling Q (rows [0, n_o) hold o's new tokens); part_out: [C B, n, Nq, D] and
//      part_lse: [C B, Nq, n], the partial of each owner's queries against this rank's K/V (lse -inf until computed)
//   2. start sending qt to r+1 and receiving the next owner's Q from r-1, before computing
//   3. the block: o's new tokens over this rank's keys (its cache share and new tokens), into block o of the
//      partials. Nothing is merged here: the partial belongs to o.
//   4. wait, swap. After C - 1 exchanges every Q has met every rank's K/V.
//   5. the partials home by all-to-all, merged there by LSE (gather_partials, inference_blocks.hpp). That step does
//      not overlap anything: the price of sending Q instead of K/V.
#include <limits>
#include <memory>
#include <utility>

#include "sim/strategies/inference.hpp"
#include "sim/strategies/inference_blocks.hpp"

namespace cpsim {

namespace {
constexpr int kTagQ = 22;

class PassQ : public InferenceStrategy {
 public:
  PassQ(const InferenceProblem& p, Communicator& comm, Device& dev)
      : p_(p), comm_(comm), dev_(dev), layout_(p.layout(InferenceKind::pass_q)) {}

  InferenceOutput forward(const Buffer& q, const Buffer& k, const Buffer& v) override {
    const Dims qd = q.dims();  // q: [B, n, Nq, D]   k, v: [B, m, Nkv, D]
    const int C = comm_.size(), r = comm_.rank();
    const std::int64_t B = qd.b;
    const Positions k_pos = layout_.kv_positions(r);
    const std::int64_t nk = k_pos.size();
    // 1. The travelling Q and the partials of every owner.
    const BufferUse travels = C > 1 ? BufferUse::message : BufferUse::work;
    Buffer qt = dev_.alloc(qd, q.dtype(), Layout::bsnd, "q_travel", travels);
    dev_.copy(View(qt), View(q));
    Buffer qt_next = C > 1 ? dev_.alloc(qd, q.dtype(), Layout::bsnd, "q_next", travels) : Buffer();
    const Buffer part_out = dev_.alloc({C * B, qd.s, qd.n, qd.d}, q.dtype(), Layout::bsnd, "partials", travels);
    const Buffer part_lse = dev_.alloc({C * B, qd.s, qd.n, 1}, q.dtype(), Layout::bns, "partial_lse", travels);
    dev_.fill(View(part_lse), -std::numeric_limits<double>::infinity());
    const int next = (r + 1) % C, prev = (r - 1 + C) % C;

    for (int i = 0; i < C; ++i) {
      comm_.recorder().step(i);
      const int owner = ((r - i) % C + C) % C;
      // 2. The next exchange, started before the block.
      Request send, recv;
      if (i + 1 < C) {
        send = comm_.isend(qt.data(), qt.bytes(), next, kTagQ);
        recv = comm_.irecv(qt_next.data(), qt_next.bytes(), prev, kTagQ);
      }
      // 3. The owner's new tokens over this rank's keys, into the owner's partial.
      const Positions q_pos = layout_.new_positions(owner);
      const std::int64_t nq = q_pos.size();
      attend(dev_, View(qt).rows(0, nq), q_pos, View(k).rows(0, nk), View(v).rows(0, nk), k_pos,
             View(part_out).batches(owner * B, B).rows(0, nq), View(part_lse).batches(owner * B, B).rows(0, nq),
             p_.mask(), p_.scale);
      // 4. The received Q becomes the current one.
      if (i + 1 < C) {
        send.wait();
        recv.wait();
        std::swap(qt, qt_next);
      }
    }
    // 5. Partials home, merged.
    comm_.recorder().step(C);
    return gather_partials(comm_, dev_, part_out, part_lse, B, layout_.new_count(r));
  }

 private:
  InferenceProblem p_;
  Communicator& comm_;
  Device& dev_;
  InferenceLayout layout_;
};

}  // namespace

std::unique_ptr<InferenceStrategy> make_prefill_pass_q(const InferenceProblem& p, Communicator& comm, Device& dev) {
  return std::make_unique<PassQ>(p, comm, dev);
}

}  // namespace cpsim
