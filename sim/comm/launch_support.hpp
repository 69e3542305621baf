// What the backends' launch functions share (each backend's launcher file uses these; callers of launch() do not).
#pragma once
#include <initializer_list>
#include <string>
#include <vector>

#include "sim/comm/backend.hpp"
#include "sim/core/bytes.hpp"

namespace cpsim {

// RankFailure for `rank`, without repeating the rank when the message already starts with it
// ("rank 2 waited 5.0 s ..." -> "rank 2: waited 5.0 s ..."). `what` may be a rank's error as encoded() (error.hpp)
// sent it: its fixes stay apart, for the program to word.
RankFailure rank_failure(int rank, const std::string& what);

// The outcomes of an in-process launch of n ranks, before they run: rank numbers set, each with a Recorder
// (tracing as asked) whose clock starts at one shared epoch, so every rank's trace lines up.
std::vector<RankOutcome> fresh_outcomes(int n, bool tracing);

// A rank's outcome on its way to the launcher from another process (processes, mpi, nccl): its result, then
// its Recorder; get_outcome reads back what put_outcome wrote.
void put_outcome(ByteWriter& w, const std::string& result, const Recorder& rec);
RankOutcome get_outcome(int rank, ByteReader& rd);

// The value of the first of these environment variables that holds an integer in [0, 2^30) (a rank, a size,
// as launchers such as mpirun and srun set them); -1 when none does.
int env_int(std::initializer_list<const char*> names);

}  // namespace cpsim
