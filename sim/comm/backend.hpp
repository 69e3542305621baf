// The vocabulary every backend and every caller of the launcher shares: the backends' names, what a launch is
// asked for (LaunchOptions), what each rank returns (RankOutcome), and how a failed rank is reported.
//
// Which backends a build holds is the registry's business (backend_registry.hpp): each backend registers itself;
// this file only names them all, and says for each what a build needs to hold it.
#pragma once
#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/comm/communicator.hpp"
#include "sim/core/error.hpp"
#include "sim/core/recorder.hpp"

namespace cpsim {

enum class Backend { threads, processes, mpi, nccl, cuda_threads };
std::vector<Backend> all_backends();
std::string_view backend_name(Backend b);
Backend parse_backend(std::string_view s);  // throws UsageError listing the accepted names
// What a build needs to hold the backend ("" for threads and processes, which every build holds).
std::string_view backend_requirement(Backend b);

struct LaunchOptions {
  int ranks = 1;
  Backend backend = Backend::threads;
  // Every blocking wait gives up after this long and reports a likely deadlock (rank, operation, peer).
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
  bool tracing = false;
  // The form of all_gather, reduce_scatter and all_reduce on the threads and processes backends; unset: their own
  // (direct: sim/comm/collectives/collectives.hpp). mpi uses MPI's own.
  std::optional<CollectiveAlgorithm> collectives;
  // Bytes of message buffers each rank holds at most at once (a run's per-rank peak: sim/runtime/memory_need.hpp).
  // The processes backend sizes its shared memory for messages in flight from it (processes_backend.hpp:
  // message_pool_bytes); 0: its smallest. Other backends ignore it.
  std::size_t heap_bytes = 0;
};

struct RankOutcome {
  int rank = 0;
  std::string result;  // what the rank function returned
  Recorder stats;
};

struct RankFailure : Error {
  int rank;
  RankFailure(int r, const std::string& what) : Error("rank " + std::to_string(r) + ": " + what), rank(r) {}
  // The rank's message with its fixes still apart, for the program to word (error.hpp).
  RankFailure(int r, const std::string& what, std::vector<Fix> fix, std::string none)
      : Error("rank " + std::to_string(r) + ": " + what, std::move(fix), std::move(none)), rank(r) {}
};

using RankFn = std::function<std::string(Communicator&)>;
using LaunchFn = std::function<std::vector<RankOutcome>(const LaunchOptions&, const RankFn&)>;

}  // namespace cpsim
