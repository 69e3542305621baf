// Pass-KV prefill: the ring with the cache's K/V travelling too (inference.hpp).
//
// Rank r of C, step i = 0..C-1, holding the K/V of owner o = (r - i) mod C:
//   1. pack k and v into kv: [2B, m, Nkv, D] (batches [0,B) = k, [B,2B) = v; rows [0, m_o) hold o's cache share
//      and new tokens, the rest padding)
//   2. start sending kv to r+1 and receiving the next owner's from r-1, before computing (the transfer hides behind
//      the block when the block takes longer: the overlap condition sim/model/inference_plan.hpp states)
//   3. the block: this rank's new tokens (rows [0, n_r) at new_positions(r)) over o's keys under the causal mask on
//      global positions. The first block computed writes (out, lse); each later one is merged in by LSE:
//        lse = logaddexp(lse_a, lse_b);  out = exp(lse_a - lse) out_a + exp(lse_b - lse) out_b
//      A block of keys all later than every query is skipped.
//   4. wait, swap buffers. After C - 1 exchanges every new token has seen the K/V of all T + P tokens.
#include <limits>
#include <memory>
#include <utility>

#include "sim/strategies/inference.hpp"
#include "sim/strategies/inference_blocks.hpp"

namespace cpsim {

namespace {
constexpr int kTagKv = 21;

class PassKv : public InferenceStrategy {
 public:
  PassKv(const InferenceProblem& p, Communicator& comm, Device& dev)
      : p_(p), comm_(comm), dev_(dev), layout_(p.layout(InferenceKind::pass_kv)) {}

  InferenceOutput forward(const Buffer& q, const Buffer& k, const Buffer& v) override {
    const Dims qd = q.dims(), kd = k.dims();  // q: [B, n, Nq, D]   k, v: [B, m, Nkv, D]
    const int C = comm_.size(), r = comm_.rank();
    const std::int64_t B = qd.b;
    const Positions q_pos = layout_.new_positions(r);
    const std::int64_t nq = q_pos.size();
    // 1. The travelling K/V and the buffer that receives the next owner's.
    const BufferUse travels = C > 1 ? BufferUse::message : BufferUse::work;
    Buffer kv = dev_.alloc({2 * B, kd.s, kd.n, kd.d}, k.dtype(), Layout::bsnd, "kv", travels);
    dev_.copy(View(kv).batches(0, B), View(k));
    dev_.copy(View(kv).batches(B, B), View(v));
    Buffer kv_next = C > 1 ? dev_.alloc(kv.dims(), k.dtype(), Layout::bsnd, "kv_next", travels) : Buffer();
    InferenceOutput o;
    o.out = dev_.alloc(qd, q.dtype(), Layout::bsnd, "out");
    o.lse = dev_.alloc({B, qd.s, qd.n, 1}, q.dtype(), Layout::bns, "lse");  // [B, Nq, n]
    dev_.fill(View(o.lse), -std::numeric_limits<double>::infinity());
    Buffer tile_out = C > 1 ? dev_.alloc(qd, q.dtype(), Layout::bsnd, "tile_out") : Buffer();
    Buffer tile_lse = C > 1 ? dev_.alloc(o.lse.dims(), q.dtype(), Layout::bns, "tile_lse") : Buffer();
    const int next = (r + 1) % C, prev = (r - 1 + C) % C;
    bool have = false;  // whether (out, lse) holds a block yet

    for (int i = 0; i < C; ++i) {
      comm_.recorder().step(i);
      const int owner = ((r - i) % C + C) % C;
      // 2. The next exchange, started before the block.
      Request send, recv;
      if (i + 1 < C) {
        send = comm_.isend(kv.data(), kv.bytes(), next, kTagKv);
        recv = comm_.irecv(kv_next.data(), kv_next.bytes(), prev, kTagKv);
      }
      // 3. This rank's new tokens over the owner's keys, written or merged.
      const Positions k_pos = layout_.kv_positions(owner);
      const std::int64_t nk = k_pos.size();
      const View qv = View(q).rows(0, nq), kv_k = View(kv).batches(0, B).rows(0, nk),
                 kv_v = View(kv).batches(B, B).rows(0, nk);
      const View out = have ? View(tile_out).rows(0, nq) : View(o.out).rows(0, nq);
      const View lse = have ? View(tile_lse).rows(0, nq) : View(o.lse).rows(0, nq);
      if (nq > 0 && attend(dev_, qv, q_pos, kv_k, kv_v, k_pos, out, lse, p_.mask(), p_.scale)) {
        if (have) dev_.merge(View(o.out).rows(0, nq), View(o.lse).rows(0, nq), out, lse);
        have = true;
      }
      // 4. The received K/V becomes the current one.
      if (i + 1 < C) {
        send.wait();
        recv.wait();
        std::swap(kv, kv_next);
      }
    }
    return o;
  }

 private:
  InferenceProblem p_;
  Communicator& comm_;
  Device& dev_;
  InferenceLayout layout_;
};

}  // namespace

std::unique_ptr<InferenceStrategy> make_prefill_pass_kv(const InferenceProblem& p, Communicator& comm, Device& dev) {
  return std::make_unique<PassKv>(p, comm, dev);
}

}  // namespace cpsim
