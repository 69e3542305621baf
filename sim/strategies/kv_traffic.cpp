#include "sim/strategies/kv_traffic.hpp"

#include <limits>

#include "sim/core/error.hpp"
#include "sim/layout/kv_need.hpp"
#include "sim/strategies/pruned_ring.hpp"

namespace cpsim {

namespace {
std::int64_t times(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) throw Error("the K/V need does not fit in 64 bits");
  return r;
}
}  // namespace

std::vector<std::vector<std::int64_t>> kv_rows_needed(const Problem& p) {
  const SeqLayout layout = p.layout();
  const Mask mask = p.mask();
  std::vector<std::vector<std::int64_t>> rows;
  for (int r = 0; r < p.ranks; ++r) rows.push_back(needed_counts(layout, r, mask));
  return rows;
}

std::vector<std::vector<std::int64_t>> kv_rows_sent(const Problem& p, StrategyKind kind) {
  const int C = p.ranks;
  if (!moves_only_kv(kind)) return std::vector<std::vector<std::int64_t>>(static_cast<std::size_t>(C));
  if (kind == StrategyKind::mask_exchange) return kv_rows_needed(p);
  const SeqLayout layout = p.layout();
  const std::int64_t s = layout.local_len();
  const RingRoute route =
      kind == StrategyKind::pruned_ring ? ring_route(layout, p.mask()) : RingRoute{};
  std::vector<std::vector<std::int64_t>> rows(static_cast<std::size_t>(C),
                                             std::vector<std::int64_t>(static_cast<std::size_t>(C), 0));
  for (int r = 0; r < C; ++r)
    for (int o = 0; o < C; ++o) {
      if (o == r) continue;
      bool reached = true;
      if (kind == StrategyKind::pruned_ring) {
        const int d = ((r - o) % C + C) % C;
        reached = d <= route.cw[static_cast<std::size_t>(o)] || C - d <= route.ccw[static_cast<std::size_t>(o)];
      }
      rows[static_cast<std::size_t>(r)][static_cast<std::size_t>(o)] = reached ? s : 0;
    }
  return rows;
}

std::vector<KvNeed> kv_need(const Problem& p) {
  const int C = p.ranks;
  // rows[r][o]: rows of owner o that rank r needs.
  const std::vector<std::vector<std::int64_t>> rows = kv_rows_needed(p);
  const std::int64_t elems = times(2 * p.batch, times(p.kv_heads, p.head_dim));  // K and V of one row
  const std::int64_t row = times(elems, static_cast<std::int64_t>(dtype_size(p.dtype)));
  const std::int64_t acc_row = times(elems, static_cast<std::int64_t>(dtype_size(p.accum_dtype())));
  std::vector<KvNeed> out(static_cast<std::size_t>(C));
  for (int r = 0; r < C; ++r) {
    std::int64_t in = 0, back = 0;
    for (int o = 0; o < C; ++o) {
      in += rows[static_cast<std::size_t>(r)][static_cast<std::size_t>(o)];
      back += rows[static_cast<std::size_t>(o)][static_cast<std::size_t>(r)];
    }
    KvNeed& n = out[static_cast<std::size_t>(r)];
    n.forward = times(in, row);
    n.backward = n.forward + times(back, acc_row);
  }
  return out;
}

bool moves_only_kv(StrategyKind kind) {
  return kind == StrategyKind::all_gather || kind == StrategyKind::ring || kind == StrategyKind::pruned_ring ||
         kind == StrategyKind::mask_exchange;
}

double redundancy(std::int64_t received, std::int64_t need) {
  if (need == 0) return received == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return static_cast<double>(received) / static_cast<double>(need) - 1.0;
}

}  // namespace cpsim
