// The two GPU backends' launchers (registered as Backend::cuda_threads and Backend::nccl, device "cuda"; the
// launcher calls them through the registry, tests may call them directly). docs/gpu.md tells the whole story.
//
// A rank started by either launcher must create its device with make_cuda_device(rec) (make_device.hpp): the
// device then shares the GPU and the streams the launcher gave the rank, which is how communication is ordered
// against compute (docs/gpu.md, "Streams").
#pragma once
#include <vector>

#include "sim/comm/backend.hpp"

namespace cpsim {

// All C ranks on one GPU, as threads of this process, each with its own streams; messages are device-to-device
// copies ordered by events. Any C >= 1 (memory permitting).
std::vector<RankOutcome> launch_cuda_threads(const LaunchOptions& opt, const RankFn& fn);

// One process per GPU. On one machine (no launcher environment): forks C processes, rank r on GPU r, sharing the
// NCCL id through shared memory; needs C GPUs and a process that has not used CUDA yet. Under mpirun or srun
// (docs/gpu.md: CPSIM_RANK / OMPI_COMM_WORLD_RANK / SLURM_PROCID ...), this process is one rank; the NCCL id comes
// from NCCL_COMM_ID or a file named by CPSIM_NCCL_ID_FILE. Outcomes return on rank 0 (others get an empty vector).
std::vector<RankOutcome> launch_nccl(const LaunchOptions& opt, const RankFn& fn);

}  // namespace cpsim
