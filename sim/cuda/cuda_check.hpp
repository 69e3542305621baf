// CUDA errors as cpsim Errors: "<what>: <CUDA's message> (<error name>)".
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "sim/core/error.hpp"

namespace cpsim::cuda {

inline void check(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return;
  throw Error(what + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")");
}

}  // namespace cpsim::cuda
