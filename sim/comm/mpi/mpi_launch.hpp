// The mpi backend: C ranks as the C processes of a job that mpirun (or srun) started, MPI between them
// (docs/mpi.md). Registered as Backend::mpi with the job services behind run_on_rank0 and broadcast_from_rank0
// (sim/comm/launcher.hpp), which only an MPI job has.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "sim/comm/backend.hpp"

namespace cpsim {

std::vector<RankOutcome> launch_mpi(const LaunchOptions& opt, const RankFn& fn);
void mpi_run_on_rank0(const std::function<void()>& fn);
void mpi_broadcast_from_rank0(std::string& bytes);

}  // namespace cpsim
