// A wrong zigzag ring forward the judge must reject: it starts the exchange before computing, as it should,
// but waits for it at once, so the transfer and the block's computation still run one after the other.
#include <utility>

#include "exercises/zigzag_ring/exercise.hpp"

namespace cpsim::exercise {

std::vector<int> zigzag_chunks(int rank, int ranks) {
  return {rank, 2 * ranks - 1 - rank};
}

void zigzag_ring_forward(Communicator& comm, Device& dev, const SeqLayout& layout, const Buffer& q, const Buffer& k,
                         const Buffer& v, const Buffer& out, const Buffer& lse, double scale) {
  const int r = comm.rank(), C = comm.size();
  const std::int64_t B = q.dims().b, t = layout.chunk_len();
  const Positions mine = layout.positions(r);
  const AttentionOptions causal{true, scale, std::nullopt};

  // K and V travel together: [2B, s, Nkv, D], batches [0, B) hold k and [B, 2B) hold v.
  const Dims kd = k.dims();
  Buffer held = dev.alloc({2 * B, kd.s, kd.n, kd.d}, k.dtype(), Layout::bsnd, "held_kv");
  Buffer incoming = dev.alloc(held.dims(), k.dtype(), Layout::bsnd, "incoming_kv");
  dev.copy(View(held).batches(0, B), View(k));
  dev.copy(View(held).batches(B, B), View(v));
  const Buffer tile = dev.alloc(q.dims(), q.dtype(), Layout::bsnd, "tile_out");
  const Buffer tile_lse = dev.alloc(lse.dims(), lse.dtype(), Layout::bns, "tile_lse");

  for (int i = 0; i < C; ++i) {
    comm.recorder().step(i);
    const int owner = ((r - i) % C + C) % C;
    Request to_next, from_prev;
    if (i + 1 < C) {
      to_next = comm.isend(held.data(), held.bytes(), (r + 1) % C);
      from_prev = comm.irecv(incoming.data(), incoming.bytes(), (r - 1 + C) % C);
      to_next.wait();  // WRONG: waits before computing; the block computes only once the transfer is over
      from_prev.wait();
    }
    const View hk = View(held).batches(0, B), hv = View(held).batches(B, B);
    const Positions theirs = layout.positions(owner);
    if (i == 0) {
      dev.attention_forward(View(q), mine, hk, hv, mine, View(out), View(lse), causal);
    } else {
      // Rows [q0, q0 + nq) of my queries against the owner's rows [0, nk).
      const bool earlier = owner < r;
      const std::int64_t q0 = earlier ? 0 : t, nq = earlier ? 2 * t : t, nk = earlier ? t : 2 * t;
      const AttentionOptions opt{true, scale, earlier ? BlockKind::half_kv : BlockKind::half_q};
      const View o = View(tile).rows(q0, nq), l = View(tile_lse).rows(q0, nq);
      dev.attention_forward(View(q).rows(q0, nq), slice(mine, q0, nq), hk.rows(0, nk), hv.rows(0, nk),
                            slice(theirs, 0, nk), o, l, opt);
      dev.merge(View(out).rows(q0, nq), View(lse).rows(q0, nq), o, l);
    }
    if (i + 1 < C) {
      std::swap(held, incoming);
    }
  }
}

}  // namespace cpsim::exercise
