// The process-wide side of the MPI backend: starting MPI once, who this process is, MPI's errors as cpsim's,
// and the watchdog that ends a job stuck in a blocking MPI call.
//
//   Start-up  MPI is initialised by the first `launch` on the mpi backend (MPI_Init_thread, FUNNELED: only the
//             thread that called launch() makes MPI calls) and finalised when the process exits (atexit), so one
//             process may launch many runs (a benchmark's sweeps) on the same MPI world.
//   Launcher  whether mpirun (or srun, or another PMI launcher) started this process is read from the
//             environment before MPI starts, so `--backend mpi --ranks 4` without mpirun is a usage error rather
//             than a lone singleton waiting for three partners that will never come.
//   Watchdog  blocking MPI calls (MPI_Wait, MPI_Allgather, ...) cannot time out. A Watch marks the call this
//             process is in; a watchdog thread (which makes no MPI calls) ends the process when one call lasts
//             longer than the launch's timeout, after printing which rank waited in what. mpirun then stops the
//             other ranks. This is the MPI counterpart of the CPU backends' "waited 120.0 s ...: likely deadlock".
#pragma once
#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <thread>

namespace cpsim::mpi {

// The world as the launcher's environment describes it: rank and size, -1 when no launcher set them.
struct LauncherEnv {
  int rank = -1, size = -1;
  bool launched() const { return rank >= 0 || size >= 1; }
};
LauncherEnv launcher_env();

// Starts MPI once per process (later calls do nothing); MPI_Finalize runs at exit.
void ensure_initialized();

// Throws Error("<what>: <MPI's error string>") unless rc is MPI_SUCCESS.
void check(int rc, const std::string& what);

// An MPI count (int) for n bytes; throws Error naming `what` when n does not fit.
int count_of(std::size_t n, const char* what);

// A blocking call, described only if it times out (building a string per call would show in the latency):
//   {"recv from", peer 1, tag 4}        -> "recv from rank 1 (tag 4)"
//   {"all_gather", seq 3, group_size 4} -> "all_gather #3 (a collective of 4 ranks)"
struct Call {
  const char* op = "";
  int peer = -1;  // world rank, p2p calls only
  int tag = -1;
  long long seq = -1;  // collectives: calls made on this communicator before this one
  int group_size = 0;
  std::string text() const;
};

// The blocking call this process is in, and the thread that ends the process when one lasts too long.
class Watchdog {
 public:
  Watchdog(int world_rank, std::chrono::milliseconds timeout);
  ~Watchdog();  // stops the thread
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void enter(const Call& call);
  void leave();

 private:
  void loop();

  int rank_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool busy_ = false;
  Call call_;
  std::chrono::steady_clock::time_point since_;
  std::thread thread_;
};

// RAII: Watch w(dog, {.op = "barrier", .seq = 2, .group_size = 4}); ... blocking MPI call ...
class Watch {
 public:
  Watch(Watchdog& dog, const Call& call) : dog_(dog) { dog_.enter(call); }
  ~Watch() { dog_.leave(); }
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

 private:
  Watchdog& dog_;
};

}  // namespace cpsim::mpi
