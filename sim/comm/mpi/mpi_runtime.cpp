#include "sim/comm/mpi/mpi_runtime.hpp"

#include <climits>
#include <cstdio>
#include <cstdlib>

#include "sim/comm/launch_support.hpp"
#include "sim/comm/launcher.hpp"
#include "sim/core/error.hpp"

namespace cpsim::mpi {
namespace {

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace

LauncherEnv launcher_env() {
  // Open MPI's mpirun, then the PMI/PMIx variables MPICH's hydra, Intel MPI and srun set.
  LauncherEnv e;
  e.rank = launcher_rank();
  e.size = env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"});
  return e;
}

void ensure_initialized() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  std::atexit(finalize_at_exit);
}

void check(int rc, const std::string& what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = std::snprintf(text, sizeof text, "MPI error %d", rc);
  throw Error(what + ": " + std::string(text, static_cast<std::size_t>(len)));
}

int count_of(std::size_t n, const char* what) {
  if (n > static_cast<std::size_t>(INT_MAX))
    throw Error(std::string(what) + " of " + std::to_string(n) +
                " bytes: MPI counts are int, so the mpi backend moves at most 2 GiB - 1 bytes per chunk");
  return static_cast<int>(n);
}

std::string Call::text() const {
  std::string s = op;
  if (peer >= 0) s += " rank " + std::to_string(peer) + " (tag " + std::to_string(tag) + ")";
  if (seq >= 0) s += " #" + std::to_string(seq) + " (a collective of " + std::to_string(group_size) + " ranks)";
  return s;
}

Watchdog::Watchdog(int world_rank, std::chrono::milliseconds timeout)
    : rank_(world_rank), timeout_(timeout), thread_([this] { loop(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::enter(const Call& call) {
  std::lock_guard<std::mutex> lock(mu_);
  busy_ = true;
  call_ = call;
  since_ = std::chrono::steady_clock::now();
}

void Watchdog::leave() {
  std::lock_guard<std::mutex> lock(mu_);
  busy_ = false;
}

void Watchdog::loop() {
  // Checks a few times per timeout (at least every second): a call is reported at most ~1/4 timeout late.
  const auto period = std::min<std::chrono::milliseconds>(
      std::chrono::seconds(1), std::max<std::chrono::milliseconds>(timeout_ / 4, std::chrono::milliseconds(1)));
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, period);
    if (stop_ || !busy_) continue;
    const auto waited = std::chrono::steady_clock::now() - since_;
    if (waited < timeout_) continue;
    const double secs = std::chrono::duration<double>(waited).count();
    std::fprintf(stderr, "cpsim: rank %d waited %.1f s in %s: likely deadlock%s; ending the MPI job\n", rank_, secs,
                 call_.text().c_str(), call_.seq >= 0 ? " (does every rank call it, in the same order?)" : "");
    std::fflush(stderr);
    // MPI_Abort may only be called from the thread that makes the MPI calls (MPI_THREAD_FUNNELED), and that
    // thread is stuck: the process ends itself, and mpirun ends the job when one of its processes dies.
    std::_Exit(1);
  }
}

}  // namespace cpsim::mpi
