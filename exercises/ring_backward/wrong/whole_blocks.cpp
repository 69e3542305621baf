// A wrong ring backward the judge must reject: right gradients and messages, but every step's
// attention_backward covers the whole block, Q x K/V, masked half included.
#include <utility>

#include "exercises/ring_backward/exercise.hpp"

namespace cpsim::exercise {

void ring_attention_backward(Communicator& comm, Device& dev, const SeqLayout& layout, const Buffer& q,
                             const Buffer& k_last, const Buffer& v_last, const Buffer& out, const Buffer& lse,
                             const Buffer& dout, const Buffer& dq, const Buffer& dk, const Buffer& dv, double scale) {
  const int r = comm.rank(), C = comm.size();
  const std::int64_t B = q.dims().b;
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
    // 2. WRONG: the whole block, masked pairs included (the kernel masks them, but the call covers them).
    dev.attention_backward(View(q), mine, View(kv).batches(0, B), View(kv).batches(B, B), layout.positions(owner),
                           View(out), View(lse), View(dout), View(dq), View(acc).batches(0, B), View(acc).batches(B, B),
                           causal);
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
