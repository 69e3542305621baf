#include "sim/comm/backend.hpp"

namespace cpsim {

std::vector<Backend> all_backends() {
  return {Backend::threads, Backend::processes, Backend::mpi, Backend::nccl, Backend::cuda_threads};
}

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
  for (Backend b : all_backends())
    if (s == backend_name(b)) return b;
  throw UsageError("unknown backend '" + std::string(s) + "'; use one of: threads, processes, mpi, nccl, cuda-threads");
}

std::string_view backend_requirement(Backend b) {
  switch (b) {
    case Backend::threads:
    case Backend::processes:
      return "";
    case Backend::mpi:
      return "an MPI build: rebuild with -DCPSIM_WITH_MPI=ON (Debian: apt-get install libopenmpi-dev openmpi-bin)";
    case Backend::nccl:
    case Backend::cuda_threads:
      return "a CUDA build: rebuild with -DCPSIM_WITH_CUDA=ON (nvcc and NCCL installed)";
  }
  return "";
}

}  // namespace cpsim
