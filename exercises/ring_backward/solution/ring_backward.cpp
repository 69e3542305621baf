// Reference solution of the ring backward exercise (kept apart from the learner's file).
//
// Step i on rank r holds the K/V of owner o = (r + 1 + i) mod C (the forward ended holding r+1's) and the dK/dV
// accumulator of the same owner:
//   1. start passing the K/V on to r-1, and receiving the next from r+1, before computing (double buffer)
//   2. the block's gradients with the saved final out and lse: p = exp(s - lse), D = rowsum(dout * out);
//      its dq stays in dq, its dk, dv go into the accumulator. Only the visible sub-block is computed (local
//      rows: h0 = the early chunk [0, t), h1 = the late chunk [t, 2t)):
//        o = r   Q[h0,h1] x KV[h0,h1], causal (the diagonal, the last step)
//        o < r   Q[h0,h1] x KV[h0 of o], all visible
//        o > r   Q[h1] x KV[h0,h1 of o], all visible
//   3. pass the accumulator on with its K/V; after C-1 hops both are home, the accumulator complete
//   4. dk, dv = the home accumulator
// Messages: C-1 K/V hops and C-1 dK/dV hops per rank; dq never moves.
#include <optional>
#include <utility>

#include "exercises/ring_backward/exercise.hpp"

namespace cpsim::exercise {

void ring_attention_backward(Communicator& comm, Device& dev, const SeqLayout& layout, const Buffer& q,
                             const Buffer& k_last, const Buffer& v_last, const Buffer& out, const Buffer& lse,
                             const Buffer& dout, const Buffer& dq, const Buffer& dk, const Buffer& dv, double scale) {
  const int r = comm.rank(), C = comm.size();
  const std::int64_t B = q.dims().b, t = layout.chunk_len();
  const Positions mine = layout.positions(r);
  const AttentionOptions causal{true, scale, std::nullopt};
  constexpr int kTagKv = 1, kTagAcc = 2;

  // K and V travel as one buffer, [2B, s, Nkv, D] (batches [0, B) k, [B, 2B) v), and so does their accumulator.
  const Dims kd = k_last.dims();
  Buffer kv = dev.alloc({2 * B, kd.s, kd.n, kd.d}, k_last.dtype(), Layout::bsnd, "kv");
  Buffer kv_next = dev.alloc(kv.dims(), k_last.dtype(), Layout::bsnd, "kv_next");
  Buffer acc = dev.alloc(kv.dims(), dk.dtype(), Layout::bsnd, "dkv");
  Buffer acc_next = dev.alloc(kv.dims(), dk.dtype(), Layout::bsnd, "dkv_next");
  dev.copy(View(kv).batches(0, B), View(k_last));
  dev.copy(View(kv).batches(B, B), View(v_last));
  const int to = (r - 1 + C) % C, from = (r + 1) % C;

  for (int i = 0; i < C; ++i) {
    const int owner = (r + 1 + i) % C;
    // 1. The next K/V does not depend on this step: start moving it now.
    Request send_kv, recv_kv;
    if (i + 1 < C) {
      send_kv = comm.isend(kv.data(), kv.bytes(), to, kTagKv);
      recv_kv = comm.irecv(kv_next.data(), kv_next.bytes(), from, kTagKv);
    }
    // 2. dq += this block's dQ; the accumulator += its dK, dV, over the visible sub-block only.
    const bool diagonal = owner == r, earlier = owner < r;
    const std::int64_t q0 = diagonal || earlier ? 0 : t, nq = diagonal || earlier ? 2 * t : t;
    const std::int64_t nk = diagonal || !earlier ? 2 * t : t;
    const AttentionOptions opt{
        true, scale,
        diagonal ? std::nullopt : std::optional<BlockKind>(earlier ? BlockKind::half_kv : BlockKind::half_q)};
    const View kk = View(kv).batches(0, B).rows(0, nk), vv = View(kv).batches(B, B).rows(0, nk);
    const View ak = View(acc).batches(0, B).rows(0, nk), av = View(acc).batches(B, B).rows(0, nk);
    dev.attention_backward(View(q).rows(q0, nq), slice(mine, q0, nq), kk, vv, slice(layout.positions(owner), 0, nk),
                           View(out).rows(q0, nq), View(lse).rows(q0, nq), View(dout).rows(q0, nq),
                           View(dq).rows(q0, nq), ak, av, opt);
    // 3. The accumulator follows its K/V.
    if (i + 1 < C) {
      Request send_acc = comm.isend(acc.data(), acc.bytes(), to, kTagAcc);
      Request recv_acc = comm.irecv(acc_next.data(), acc_next.bytes(), from, kTagAcc);
      send_kv.wait();
      recv_kv.wait();
      send_acc.wait();
      recv_acc.wait();
      std::swap(kv, kv_next);
      std::swap(acc, acc_next);
    }
  }
  // 4. Home: the accumulator holds every rank's contributions to this rank's keys.
  dev.copy(View(dk), View(acc).batches(0, B));
  dev.copy(View(dv), View(acc).batches(B, B));
}

}  // namespace cpsim::exercise
