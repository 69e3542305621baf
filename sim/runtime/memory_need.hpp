// The memory a run's ranks hold: each rank's peak of live device buffers, exactly as its MemoryMeter will report it,
// found before the run by a counting run of the same strategy code (sim/model/count_run.hpp: the counting device
// allocates and frees every buffer the rank would, and holds no data).
//
// The processes backend sizes its shared heap from it (LaunchOptions::heap_bytes, sim/comm/shm_heap.hpp).
#pragma once
#include <cstdint>
#include <vector>

#include "sim/runtime/run.hpp"

namespace cpsim {

struct MemoryNeed {
  std::vector<std::int64_t> rank_peak;  // bytes, per rank
  std::int64_t largest_rank_peak() const;
};

// Validates the problem (UsageError) and counts it. Costs a counting run: no math, no data (milliseconds at the
// shapes a CPU can run).
MemoryNeed memory_need(const RunConfig& cfg);

}  // namespace cpsim
