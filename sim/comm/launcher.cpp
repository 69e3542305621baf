// launch(): validates the options and hands the run to its backend.
#include "sim/comm/launcher.hpp"

#include <cstdlib>
#include <utility>

#include "sim/comm/launch_support.hpp"
#include "sim/comm/processes_backend.hpp"
#include "sim/comm/threads_backend.hpp"
#ifdef CPSIM_HAVE_CUDA
#include "sim/cuda/cuda_api.hpp"
#endif

namespace cpsim {

#ifdef CPSIM_HAVE_MPI
std::vector<RankOutcome> launch_mpi(const LaunchOptions& opt, const RankFn& fn);  // sim/comm/mpi
void mpi_run_on_rank0(const std::function<void()>& fn);                           // sim/comm/mpi
void mpi_broadcast_from_rank0(std::string& bytes);                                // sim/comm/mpi
#endif

namespace {
bool expecting_announced = false, announced = false;  // expect_announced_launches(), announced_launch()
}  // namespace

std::string_view backend_name(Backend b) {
  switch (b) {
    case Backend::threads:
      return "threads";
    case Backend::processes:
      return "processes";
    case Backend::mpi:
      return "mpi";
    case Backend::nccl:
      return "nccl";
    case Backend::cuda_threads:
      return "cuda-threads";
  }
  return "?";
}

Backend parse_backend(std::string_view s) {
  for (Backend b : {Backend::threads, Backend::processes, Backend::mpi, Backend::nccl, Backend::cuda_threads})
    if (s == backend_name(b)) return b;
  throw UsageError("unknown backend '" + std::string(s) + "'; use one of: threads, processes, mpi, nccl, cuda-threads");
}

std::vector<RankOutcome> launch(const LaunchOptions& opt, const RankFn& fn) {
  require(opt.ranks >= 1, "the number of ranks must be at least 1 (got " + std::to_string(opt.ranks) + ")",
          "use --ranks 1 or more");
  require(opt.timeout.count() > 0, "the wait timeout must be positive", "give a timeout of at least 1 ms");
  switch (opt.backend) {
    case Backend::threads:
      require(opt.ranks <= kMaxThreadsRanks,
              "the threads backend runs at most " + std::to_string(kMaxThreadsRanks) + " ranks (asked for " +
                  std::to_string(opt.ranks) + ")",
              "use fewer ranks");
      return launch_threads(opt, fn);
    case Backend::processes:
      require(opt.ranks <= kMaxProcessRanks,
              "the processes backend runs at most " + std::to_string(kMaxProcessRanks) + " ranks (asked for " +
                  std::to_string(opt.ranks) + ")",
              "use fewer ranks, or --backend threads");
      return launch_processes(opt, fn);
    case Backend::mpi:
      require(!expecting_announced || std::exchange(announced, false),
              "this program launches on the mpi backend outside the runs rank 0 announces to the job's other "
              "processes, which they cannot follow",
              "run it with --backend threads or processes");
#ifdef CPSIM_HAVE_MPI
      return launch_mpi(opt, fn);
#else
      throw UsageError(
          "backend 'mpi' is not built in; use --backend threads or --backend processes, or rebuild with "
          "-DCPSIM_WITH_MPI=ON (Debian: apt-get install libopenmpi-dev openmpi-bin)");
#endif
    case Backend::nccl:
    case Backend::cuda_threads:
#ifdef CPSIM_HAVE_CUDA
      return opt.backend == Backend::nccl ? launch_nccl(opt, fn) : launch_cuda_threads(opt, fn);
#endif
      throw UsageError("backend '" + std::string(backend_name(opt.backend)) +
                       "' is not built in (it needs a CUDA build); use --backend threads or --backend processes");
  }
  throw UsageError("unknown backend");
}

RankFailure rank_failure(int rank, const std::string& what) {
  for (const std::string& prefix : {"rank " + std::to_string(rank) + ": ", "rank " + std::to_string(rank) + " "})
    if (what.rfind(prefix, 0) == 0) return RankFailure(rank, what.substr(prefix.size()));
  return RankFailure(rank, what);
}

int launcher_rank() {
  return env_int({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"});
}

int env_int(std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') {
      char* end = nullptr;
      const long x = std::strtol(v, &end, 10);
      if (end != v && *end == '\0' && x >= 0 && x < (1L << 30)) return static_cast<int>(x);
    }
  return -1;
}

void run_on_rank0(const std::function<void()>& fn) {
#ifdef CPSIM_HAVE_MPI
  if (launcher_rank() >= 0) return mpi_run_on_rank0(fn);
#endif
  fn();
}

void broadcast_from_rank0([[maybe_unused]] std::string& bytes) {
#ifdef CPSIM_HAVE_MPI
  if (launcher_rank() >= 0) mpi_broadcast_from_rank0(bytes);
#endif
}

void expect_announced_launches() {
  expecting_announced = true;
}

void announced_launch() {
  announced = true;
}

std::vector<int> iota_ranks(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

std::vector<RankOutcome> fresh_outcomes(int n, bool tracing) {
  const auto epoch = Recorder::Clock::now();
  std::vector<RankOutcome> out(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    out[r].rank = r;
    out[r].stats = Recorder(r, tracing);
    out[r].stats.set_epoch(epoch);
  }
  return out;
}

void put_outcome(ByteWriter& w, const std::string& result, const Recorder& rec) {
  w.put(result);
  rec.serialize(w);
}

RankOutcome get_outcome(int rank, ByteReader& rd) {
  RankOutcome o;
  o.rank = rank;
  rd.get(o.result);
  o.stats = Recorder::deserialize(rd);
  return o;
}

}  // namespace cpsim
