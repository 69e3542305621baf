// Which attention kernels the CUDA device runs: `--kernel` on `cpsim run` and `cpsim bench strategies` (GPU backends)
// and on `cpsim bench gpu_attention`. Plain C++, no CUDA header (docs/gpu.md, "The attention kernels").
//   auto  mma2 where the tensor-core kernels take the call (bf16, head dim 64 or 128), else simt
//   mma2  this release's tensor-core kernels: 128 query rows per forward block, one backward block per query head
//   mma1  the first tensor-core kernels, kept beside mma2 to check it against and to measure its gain
//   simt  the CUDA-core kernels: f32 arithmetic, bf16 or f32 storage, any head dim up to 256
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "sim/core/dtype.hpp"
#include "sim/core/error.hpp"

namespace cpsim {

enum class GpuKernel { automatic, mma2, mma1, simt };

GpuKernel parse_gpu_kernel(const std::string& name);  // UsageError naming the choices
const char* gpu_kernel_name(GpuKernel k);
// None when the kernel computes attention on inputs of this dtype and head dim, else the UsageError (the constraint
// and its fix) to throw.
std::optional<UsageError> gpu_kernel_problem(GpuKernel k, DType dtype, std::int64_t head_dim);

}  // namespace cpsim
