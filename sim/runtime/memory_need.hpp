// The memory a run will hold, known before it allocates anything, and the check that refuses a run the machine
// cannot hold (exit 2, naming the need, the limit and a fix) instead of letting it end in std::bad_alloc or the
// kernel's OOM killer.
//
// Per rank (each a thread of this process, or a process of its own):
//   device    the most its device holds at once: exact, from a counting run (sim/model/count_run.hpp), which runs
//             the unchanged strategy code on sizes alone; equal to the Recorder's peak of the real run
//   host      beside the device (rank_run.cpp): its inputs are made straight into its device buffers (a GPU stages
//             one tensor), so what it holds is its results, downloaded as doubles and then serialised once
//             (2 x 8 bytes per result element, the most at once)
// The caller (run.cpp), after the ranks: the results as sent, deserialised and gathered, the global inputs only
// where they are kept (--check, --dump), and, with the check, the reference's copies and results (check.cpp,
// naive.hpp), at the largest of those stages. Host blocks a CPU device gives back stay cached for reuse
// (host_pool.hpp) while the caller works: counted too.
//
//   total          the most the run holds on this machine at once: max(sum of ranks, caller + cached blocks)
//   largest process the most one process holds (with ranks in-process: the total)
// A GPU device's buffers live on the GPU: they are not host memory and the GPU's allocator reports its own limit.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sim/kernels/reference.hpp"
#include "sim/os/host_memory.hpp"
#include "sim/runtime/run.hpp"

namespace cpsim {

struct MemoryNeed {
  std::vector<std::int64_t> device_peak;   // per rank, bytes (the counting device)
  std::vector<std::int64_t> message_peak;  // per rank, the part of it in message buffers (BufferUse::message)
  std::int64_t rank_host = 0;             // per rank, host bytes beside the device's
  std::int64_t caller = 0;                // the caller's, after the ranks
  bool device_on_host = true;             // the device's buffers are host memory (the cpu device)
  bool ranks_in_process = true;           // the ranks are threads of this process (threads, cuda-threads)
  std::int64_t total = 0;                 // on this machine at once
  std::int64_t largest_process = 0;       // in one process
  bool lower_bound = false;               // only the caller's part was counted: already over any limit

  std::int64_t rank_peak(int rank) const;  // device_peak[rank] (when on the host) + rank_host
  std::int64_t max_rank_peak() const;
};

// Counts the need of cfg, whose problem is `valid` (validated(cfg.problem, cfg.strategy)). The device peaks are
// counted only when the caller's part alone fits in `within` bytes (a run far beyond any machine is refused without
// counting: lower_bound).
MemoryNeed memory_need(const RunConfig& cfg, const ValidProblem& valid, std::int64_t within = INT64_MAX);
// Validates the configuration (UsageError), then counts.
MemoryNeed memory_need(const RunConfig& cfg, std::int64_t within = INT64_MAX);

// The memory the run may use: cfg.memory_limit when set (--memory-limit), else host_memory() now.
HostMemory memory_limits(const RunConfig& cfg);

// UsageError when memory_need(cfg) exceeds memory_limits(cfg), e.g.
//   "the run needs 9.1 GiB of memory (4 ranks of 1.2 GiB, then 4.3 GiB to gather and check the results), more than
//    the 7.5 GiB available (MemAvailable); use --seq 32768, --strategy ring or --memory-limit BYTES"
// The fixes offered are those that make this run fit (fewer tokens, the ring instead of the all-gather, f32 instead
// of f64, no check), apart from the constraint, for the program to word in its flags (sim/core/error.hpp). Under
// mpirun, rank 0 checks. Returns the need it counted, for the launch to size by (the processes backend's heap);
// under mpirun the other ranks check nothing and get an empty MemoryNeed. valid: validated(cfg.problem,
// cfg.strategy); without it, check_memory validates first.
MemoryNeed check_memory(const RunConfig& cfg, const ValidProblem& valid);
MemoryNeed check_memory(const RunConfig& cfg);

// One device running the whole problem (`cpsim attention`, `cpsim bench attention`): its buffers (single_run.cpp),
// the seeded inputs and results as doubles, and with `check` the reference's (check.cpp).
std::int64_t single_device_need(const AttentionShape& shape, DType dtype, bool backward, bool check);
// Its device's part: the buffers single_run.cpp allocates (what SingleRun::peak_bytes measures).
std::int64_t single_device_peak(const AttentionShape& shape, DType dtype, bool backward);
// UsageError when single_device_need exceeds `limit` (or host_memory() when limit is 0), with a fix of flags.
void check_single_device_memory(const AttentionShape& shape, DType dtype, bool backward, bool check,
                                std::int64_t limit);

}  // namespace cpsim
