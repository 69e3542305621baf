#include "sim/cuda/gpu_kernel.hpp"

#include "sim/core/error.hpp"

namespace cpsim {

GpuKernel parse_gpu_kernel(const std::string& name) {
  for (GpuKernel k : {GpuKernel::automatic, GpuKernel::mma2, GpuKernel::mma1, GpuKernel::simt})
    if (name == gpu_kernel_name(k)) return k;
  throw UsageError("unknown --kernel '" + name + "'; use auto, mma2, mma1 or simt");
}

const char* gpu_kernel_name(GpuKernel k) {
  switch (k) {
    case GpuKernel::automatic:
      return "auto";
    case GpuKernel::mma2:
      return "mma2";
    case GpuKernel::mma1:
      return "mma1";
    case GpuKernel::simt:
      return "simt";
  }
  return "?";
}

std::optional<UsageError> gpu_kernel_problem(GpuKernel k, DType dtype, std::int64_t head_dim) {
  if (k != GpuKernel::mma2 && k != GpuKernel::mma1) return std::nullopt;
  if (dtype == DType::bf16 && (head_dim == 64 || head_dim == 128)) return std::nullopt;
  return UsageError(std::string("--kernel ") + gpu_kernel_name(k) +
                        " runs on the tensor cores, which take bf16 with head dim 64 or 128 (got " +
                        std::string(dtype_name(dtype)) + ", head dim " + std::to_string(head_dim) + ")",
                    {Fix{{"--dtype bf16 --head-dim 128", "--kernel auto"}}});
}

}  // namespace cpsim
