#include "sim/cuda/nccl_env.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "sim/comm/launch_support.hpp"
#include "sim/core/error.hpp"
#include "sim/cuda/cuda_check.hpp"
#include "sim/cuda/nccl_comm.hpp"
#include "sim/cuda/rank_gpu.hpp"

namespace cpsim::cuda {

JobEnv job_env() {
  JobEnv e;
  e.rank = env_int({"CPSIM_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"});
  e.size = env_int({"CPSIM_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"});
  e.local_rank =
      env_int({"CPSIM_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK"});
  e.external = e.rank >= 0 && e.size > 1;
  return e;
}

ncclUniqueId job_nccl_id(const JobEnv& env, std::chrono::milliseconds timeout) {
  ncclUniqueId id{};
  const std::string who = "rank " + std::to_string(env.rank) + ": ";
  if (const char* addr = std::getenv("NCCL_COMM_ID"); addr != nullptr && *addr != '\0') {
    nccl_check(ncclGetUniqueId(&id), who + "ncclGetUniqueId (NCCL_COMM_ID=" + addr + ")");
    return id;
  }
  const char* file = std::getenv("CPSIM_NCCL_ID_FILE");
  if (file == nullptr || *file == '\0')
    throw UsageError(
        "an nccl run started by mpirun or srun must share rank 0's NCCL id: set CPSIM_NCCL_ID_FILE to a "
        "new path on a filesystem every machine sees, or NCCL_COMM_ID=<host of rank 0>:<free port>");
  const std::filesystem::path path(file);
  if (env.rank == 0) {
    nccl_check(ncclGetUniqueId(&id), who + "ncclGetUniqueId");
    const std::filesystem::path tmp = path.string() + ".tmp";
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(&id), sizeof id);
      if (!out) throw Error(who + "could not write the NCCL id to " + tmp.string());
    }
    std::filesystem::rename(tmp, path);  // the others never see half a file
    return id;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::error_code ec;
    if (std::filesystem::file_size(path, ec) == sizeof id && !ec) {
      std::ifstream in(path, std::ios::binary);
      in.read(reinterpret_cast<char*>(&id), sizeof id);
      if (in) return id;
    }
    if (std::chrono::steady_clock::now() > deadline)
      throw Error(who + "rank 0 never wrote its NCCL id to " + path.string() +
                  " (CPSIM_NCCL_ID_FILE must be on a filesystem every machine sees)");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::vector<std::string> gather_to_rank0(Communicator& comm, const std::string& payload) {
  RankGpu& gpu = *RankGpu::current();
  const cudaStream_t s = gpu.compute();
  const int c = comm.size();
  auto device_buffer = [&](std::size_t n) {
    void* p = nullptr;
    check(cudaMallocAsync(&p, std::max<std::size_t>(n, 8), s), "allocating a result buffer");
    return p;
  };
  // 1. Every payload's size.
  void* sizes_dev = device_buffer(8 * (static_cast<std::size_t>(c) + 1));
  const std::uint64_t mine = payload.size();
  check(cudaMemcpyAsync(static_cast<char*>(sizes_dev) + 8 * c, &mine, 8, cudaMemcpyHostToDevice, s), "result sizes");
  comm.all_gather(static_cast<char*>(sizes_dev) + 8 * c, sizes_dev, 8);
  std::vector<std::uint64_t> sizes(c);
  check(cudaMemcpyAsync(sizes.data(), sizes_dev, 8 * c, cudaMemcpyDeviceToHost, s), "result sizes");
  gpu.wait(s, "gathering result sizes");
  // 2. The payloads, to rank 0 one after the other.
  std::vector<std::string> out;
  void* buf = device_buffer(payload.size());
  if (comm.rank() != 0) {
    check(cudaMemcpyAsync(buf, payload.data(), payload.size(), cudaMemcpyHostToDevice, s), "a result");
    comm.send(buf, payload.size(), 0);
  } else {
    out.push_back(payload);
    for (int p = 1; p < c; ++p) {
      void* in = device_buffer(sizes[p]);
      comm.recv(in, sizes[p], p);
      std::string got(sizes[p], '\0');
      check(cudaMemcpyAsync(got.data(), in, sizes[p], cudaMemcpyDeviceToHost, s), "a result");
      gpu.wait(s, "gathering results");
      cudaFreeAsync(in, s);
      out.push_back(std::move(got));
    }
  }
  gpu.wait(s, "gathering results");
  cudaFreeAsync(buf, s);
  cudaFreeAsync(sizes_dev, s);
  return out;
}

}  // namespace cpsim::cuda
