#include "sim/strategies/inference_blocks.hpp"

#include <limits>

namespace cpsim {

bool attend(Device& dev, const View& q, const Positions& q_pos, const View& k, const View& v, const Positions& k_pos,
            const View& out, const View& lse, const Mask& mask, double scale) {
  if (q_pos.empty() || k_pos.empty()) return false;
  if (visible_pairs(q_pos, k_pos, mask) == 0) {
    dev.record_skip(q_pos, k_pos, "attention_forward");
    return false;
  }
  dev.attention_forward(q, q_pos, k, v, k_pos, out, lse, AttentionOptions{mask, scale, std::nullopt});
  return true;
}

InferenceOutput gather_partials(Communicator& comm, Device& dev, const Buffer& part_out, const Buffer& part_lse,
                                std::int64_t batch, std::int64_t rows) {
  const int C = comm.size(), r = comm.rank();
  const Dims od = part_out.dims(), ld = part_lse.dims();
  const std::int64_t B = batch;
  // 1. Every partial to its queries' owner.
  Buffer got_out = part_out, got_lse = part_lse;
  if (C > 1) {
    got_out = dev.alloc(od, part_out.dtype(), Layout::bsnd, "partials_home", BufferUse::message);
    got_lse = dev.alloc(ld, part_lse.dtype(), Layout::bns, "partial_lse_home", BufferUse::message);
    comm.all_to_all(part_out.data(), got_out.data(), part_out.bytes() / static_cast<std::size_t>(C));
    comm.all_to_all(part_lse.data(), got_lse.data(), part_lse.bytes() / static_cast<std::size_t>(C));
  }
  // 2. The own partial, then every other one merged into it.
  InferenceOutput o;
  o.out = dev.alloc({B, od.s, od.n, od.d}, part_out.dtype(), Layout::bsnd, "out");
  o.lse = dev.alloc({B, ld.s, ld.n, 1}, part_lse.dtype(), Layout::bns, "lse");
  dev.copy(View(o.out), View(got_out).batches(r * B, B));
  dev.copy(View(o.lse), View(got_lse).batches(r * B, B));
  if (rows == 0) return o;
  for (int p = 0; p < C; ++p) {
    if (p == r) continue;
    dev.merge(View(o.out).rows(0, rows), View(o.lse).rows(0, rows), View(got_out).batches(p * B, B).rows(0, rows),
              View(got_lse).batches(p * B, B).rows(0, rows));
  }
  return o;
}

}  // namespace cpsim
