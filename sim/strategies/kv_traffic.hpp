// The K/V bytes each rank must receive (the need, kv_need.hpp) against the bytes a strategy sends it.
//
//   need_fwd(r) = sum_{o != r} rows(r, o) * 2 B Nkv D * size(dtype)                  K and V rows r's queries see
//   need_bwd(r) = need_fwd(r) + sum_{o != r} rows(o, r) * 2 B Nkv D * size(accum)    and the dK/dV partial sums
//                                                                                      of r's rows computed elsewhere
//   redundancy(r) = received(r) / need(r) - 1
// The strategies that move only K/V and dK/dV (all_gather, ring, pruned_ring, mask_exchange) are measured against
// it; Ulysses and the hybrid move Q and outputs as well.
#pragma once
#include <cstdint>
#include <vector>

#include "sim/strategies/strategy.hpp"

namespace cpsim {

struct KvNeed {
  std::int64_t forward = 0;   // bytes of K/V
  std::int64_t backward = 0;  // bytes of K/V again and of dK/dV partial sums
  std::int64_t total(bool with_backward) const { return forward + (with_backward ? backward : 0); }
};

// Per rank, for the problem's layout and mask. Throws Error if a count does not fit in 64 bits.
std::vector<KvNeed> kv_need(const Problem& p);

// Per rank r and owner o: rows of o's K/V that r's queries see (0 for o == r), and rows of o's K/V that reach r in
// the strategy's forward (all_gather and ring: all s; pruned_ring: s where o's route passes r; mask_exchange: the
// need). Empty rows for the strategies that move Q as well.
std::vector<std::vector<std::int64_t>> kv_rows_needed(const Problem& p);
std::vector<std::vector<std::int64_t>> kv_rows_sent(const Problem& p, StrategyKind kind);

// Whether the strategy moves only K/V (and dK/dV): its received bytes compare with the need.
bool moves_only_kv(StrategyKind kind);

// received / need - 1; 0 when both are 0; +infinity when only the need is 0.
double redundancy(std::int64_t received, std::int64_t need);

}  // namespace cpsim
