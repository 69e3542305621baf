// Decode over a sharded cache (inference.hpp): a few new tokens per sequence, their K/V written round-robin, the
// cache spread over every rank.
//
// Rank r of C:
//   1. all-gather the Q of the new tokens: q_all: [C B, n, Nq, D], block o = owner o's new tokens (rows [0, n_o))
//   2. for every owner o: o's new tokens over this rank's K/V (its cache share and the new tokens written here),
//      into block o of part_out: [C B, n, Nq, D] and part_lse: [C B, Nq, n] (lse -inf where nothing is visible)
//   3. the partials home by all-to-all and merged by LSE (gather_partials, inference_blocks.hpp): the merge of a
//      ring step, across ranks. Every rank reads only its share of the cache: the point of sharding it.
#include <limits>
#include <memory>

#include "sim/strategies/inference.hpp"
#include "sim/strategies/inference_blocks.hpp"

namespace cpsim {

namespace {

class Decode : public InferenceStrategy {
 public:
  Decode(const InferenceProblem& p, Communicator& comm, Device& dev)
      : p_(p), comm_(comm), dev_(dev), layout_(p.layout(InferenceKind::decode)) {}

  InferenceOutput forward(const Buffer& q, const Buffer& k, const Buffer& v) override {
    const Dims qd = q.dims();  // q: [B, n, Nq, D]   k, v: [B, m, Nkv, D]
    const int C = comm_.size(), r = comm_.rank();
    const std::int64_t B = qd.b;
    const Positions k_pos = layout_.kv_positions(r);
    const std::int64_t nk = k_pos.size();
    const BufferUse travels = C > 1 ? BufferUse::message : BufferUse::work;
    // 1. Every rank's new Q, on every rank.
    comm_.recorder().step(0);
    Buffer q_all = q;
    if (C > 1) {
      q_all = dev_.alloc({C * B, qd.s, qd.n, qd.d}, q.dtype(), Layout::bsnd, "q_all", travels);
      comm_.all_gather(q.data(), q_all.data(), q.bytes());
    }
    // 2. The partial of every owner's new tokens over this rank's share of the cache.
    const Buffer part_out = dev_.alloc({C * B, qd.s, qd.n, qd.d}, q.dtype(), Layout::bsnd, "partials", travels);
    const Buffer part_lse = dev_.alloc({C * B, qd.s, qd.n, 1}, q.dtype(), Layout::bns, "partial_lse", travels);
    dev_.fill(View(part_lse), -std::numeric_limits<double>::infinity());
    for (int o = 0; o < C; ++o) {
      const Positions q_pos = layout_.new_positions(o);
      const std::int64_t nq = q_pos.size();
      attend(dev_, View(q_all).batches(o * B, B).rows(0, nq), q_pos, View(k).rows(0, nk), View(v).rows(0, nk),
             k_pos, View(part_out).batches(o * B, B).rows(0, nq), View(part_lse).batches(o * B, B).rows(0, nq),
             p_.mask(), p_.scale);
    }
    // 3. Partials home, merged.
    comm_.recorder().step(1);
    return gather_partials(comm_, dev_, part_out, part_lse, B, layout_.new_count(r));
  }

 private:
  InferenceProblem p_;
  Communicator& comm_;
  Device& dev_;
  InferenceLayout layout_;
};

}  // namespace

std::unique_ptr<InferenceStrategy> make_decode(const InferenceProblem& p, Communicator& comm, Device& dev) {
  return std::make_unique<Decode>(p, comm, dev);
}

}  // namespace cpsim
