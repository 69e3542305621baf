// Each rank's peak memory before a run, and the processes backend's shared heap sized from it.
#include "sim/runtime/memory_need.hpp"

#include <doctest/doctest.h>

#include "sim/comm/shm_heap.hpp"
#include "sim/core/host_arena.hpp"
#include "sim/runtime/rank_run.hpp"

using namespace cpsim;

namespace {

RunConfig config(StrategyKind kind, Backend backend, bool backward) {
  RunConfig cfg;
  cfg.strategy = kind;
  cfg.backend = backend;
  cfg.backward = backward;
  cfg.problem.ranks = 4;
  cfg.problem.seq = 128;
  cfg.problem.heads = 8;
  cfg.problem.kv_heads = 4;
  cfg.problem.head_dim = 16;
  cfg.problem.dtype = DType::f32;
  return cfg;
}

}  // namespace

TEST_CASE("memory_need gives every rank's peak exactly as the run then measures it") {
  for (StrategyKind kind : all_strategies())
    for (bool backward : {false, true}) {
      CAPTURE(strategy_name(kind));
      CAPTURE(backward);
      const RunConfig cfg = config(kind, Backend::threads, backward);
      const MemoryNeed need = memory_need(cfg);
      const RunResult r = run(cfg);
      REQUIRE(need.rank_peak.size() == r.ranks.size());
      std::int64_t largest = 0;
      for (const RankReport& rank : r.ranks) {
        CHECK(need.rank_peak[rank.rank] == rank.stats.peak_bytes());
        largest = std::max(largest, rank.stats.peak_bytes());
      }
      CHECK(need.largest_rank_peak() == largest);
    }
}

TEST_CASE("a processes run's buffers all live in the shared heap that memory_need sizes, for every strategy") {
  for (StrategyKind kind : all_strategies()) {
    CAPTURE(strategy_name(kind));
    const RunConfig cfg = config(kind, Backend::processes, true);
    LaunchOptions opt;
    opt.ranks = cfg.problem.ranks;
    opt.backend = Backend::processes;
    opt.heap_bytes = static_cast<std::size_t>(memory_need(cfg).largest_rank_peak());
    const auto out = launch(opt, [&](Communicator& comm) {
      run_rank(cfg, comm);
      auto* arena = dynamic_cast<RankArena*>(host_arena());
      if (arena == nullptr) return std::string("no arena");
      return "misses " + std::to_string(arena->misses());
    });
    for (const auto& o : out) CHECK(o.result == "misses 0");
  }
}
