// Programs that make several runs and read each one's results before the next (the lessons), under mpirun with
// --backend mpi. Only rank 0 has a run's results, so only rank 0 runs the program; the job's other processes
// take part in its runs and nothing else:
//
//   rank 0          lead_runs(), then the program as usual: every run() on the mpi backend first sends its
//                   RunConfig to the other processes (announce_run); at exit, a last, empty message releases them.
//   other ranks     follow_runs(): runs every RunConfig rank 0 sends, until released; then the program ends.
//
// A program that launches on the mpi backend other than through run() (some lessons call launch() with a rank
// function of their own) cannot be followed: that launch throws UsageError on rank 0, which then releases the
// others. What travels is the RunConfig's plain fields (problem, strategy, backend, seed, ...), not its step_hook or
// tamper functions: a run announced with either set is a usage error. While waiting, the other processes poll
// once a millisecond, leaving the cores to rank 0 (broadcast_from_rank0, launcher.hpp).
#pragma once
#include <string>

#include "sim/runtime/run.hpp"

namespace cpsim {

void lead_runs();
void follow_runs();

// Called by run() before it launches: sends cfg to the followers when this process leads and cfg is an mpi run.
void announce_run(const RunConfig& cfg);

// The plain fields of a RunConfig, as bytes and back.
std::string encode_run(const RunConfig& cfg);
RunConfig decode_run(const std::string& bytes);

}  // namespace cpsim
