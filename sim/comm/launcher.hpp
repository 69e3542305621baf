// The launcher: starts C ranks on a backend, runs one function on each, returns what each rank returned
// plus its Recorder (counts, work, peak memory, trace). Used by `cpsim run`, the lessons, tests and benches.
//
//   auto outcomes = launch({.ranks = 4, .backend = Backend::threads}, [&](Communicator& comm) {
//     ... return bytes;   // a rank's result, serialised (ByteWriter)
//   });
//
// launch() checks the options and hands the run to the backend registered for opt.backend (backend_registry.hpp).
// A rank that throws, crashes or exits early fails the whole run within seconds: launch() throws
// RankFailure naming the rank and what happened, after every other rank has stopped waiting and every
// process and shared-memory segment of the run is gone.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "sim/comm/backend.hpp"

namespace cpsim {

// Runs fn on every rank. Returns the outcomes in rank order (under MPI: on world rank 0 only; other ranks
// get an empty vector). Throws UsageError for impossible options (ranks < 1, a backend not built in, more ranks
// than the backend runs).
std::vector<RankOutcome> launch(const LaunchOptions& opt, const RankFn& fn);
// The options' own checks, without launching (a run checks them before it counts its memory).
void check_launch(const LaunchOptions& opt);

// The rank an MPI launcher (mpirun, srun) gave this process, read from its environment (OMPI_COMM_WORLD_RANK,
// PMIX_RANK, PMI_RANK); -1 when none did. In such a job rank 0 reports (tables, command-line errors, which
// every rank finds alike); the others print nothing.
int launcher_rank();

// Work for world rank 0 alone (a benchmark of the other backends inside an MPI job): in a process that mpirun
// started (mpi backend built in), runs fn on rank 0 while the job's other processes wait without taking a core
// (they poll a barrier once a millisecond); elsewhere, runs fn. Every process of such a job must call it.
void run_on_rank0(const std::function<void()>& fn);

// Rank 0's `bytes` in every process of an MPI job (mpi backend built in, mpirun having started this process);
// the others wait for them polling once a millisecond. Elsewhere, leaves `bytes` as it is. Every process of such
// a job must call it, in the same order.
void broadcast_from_rank0(std::string& bytes);

// While rank 0 leads the runs of an MPI job (sim/runtime/mpi_runs.hpp), the job's other processes take part in
// the runs rank 0 announces and in nothing else: launch() on the mpi backend then throws UsageError unless
// announced_launch() came right before it.
void expect_announced_launches();
void announced_launch();

}  // namespace cpsim
