#include "sim/runtime/memory_need.hpp"

#include <algorithm>

#include "sim/model/count_run.hpp"

namespace cpsim {

std::int64_t MemoryNeed::largest_rank_peak() const {
  return rank_peak.empty() ? 0 : *std::max_element(rank_peak.begin(), rank_peak.end());
}

MemoryNeed memory_need(const RunConfig& cfg) {
  model::CountOptions opt;
  opt.backward = cfg.backward;
  const model::CountResult counted = model::count_run(cfg.problem, cfg.strategy, opt);
  MemoryNeed need;
  for (const Recorder& rec : counted.ranks) need.rank_peak.push_back(rec.peak_bytes());
  return need;
}

}  // namespace cpsim
