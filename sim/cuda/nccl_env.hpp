// An nccl run started by an outside launcher (mpirun, srun, or by hand): who this process is, where the NCCL id
// comes from, and how the ranks' outcomes reach rank 0.
//
//   rank        CPSIM_RANK, else OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID
//   size        CPSIM_WORLD_SIZE, else OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS
//   local rank  CPSIM_LOCAL_RANK, else OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID, LOCAL_RANK
//               (the GPU this process uses; without one, rank % visible GPUs)
// A process counts as one rank of such a job when a rank is set and the size is above 1.
// The NCCL id: with NCCL_COMM_ID=<host of rank 0>:<port> set on every rank, NCCL derives the id from that address;
// otherwise rank 0 makes one and writes it to the file CPSIM_NCCL_ID_FILE (a path on a filesystem every machine
// sees, new for every job), where the others wait for it.
#pragma once
#include <nccl.h>

#include <chrono>
#include <string>
#include <vector>

#include "sim/comm/communicator.hpp"

namespace cpsim::cuda {

struct JobEnv {
  bool external = false;
  int rank = -1, size = -1, local_rank = -1;
};
JobEnv job_env();

ncclUniqueId job_nccl_id(const JobEnv& env, std::chrono::milliseconds timeout);

// Every rank's payload, on rank 0 in rank order (empty on the others). Collective; uses the rank's current RankGpu.
std::vector<std::string> gather_to_rank0(Communicator& comm, const std::string& payload);

}  // namespace cpsim::cuda
