#include "sim/cuda/make_device.hpp"

#include <chrono>
#include <string>

#include "sim/core/error.hpp"
#include "sim/cuda/cuda_device.hpp"
#include "sim/cuda/probe.hpp"
#include "sim/cuda/rank_gpu.hpp"
#include "sim/kernels/device_registry.hpp"

namespace cpsim {

std::unique_ptr<Device> make_cuda_device(Recorder& rec, int device_index, GpuKernel kernel) {
  if (auto gpu = cuda::RankGpu::current()) {
    if (device_index >= 0 && device_index != gpu->device())
      throw Error("make_cuda_device: this rank runs on GPU " + std::to_string(gpu->device()) + ", not GPU " +
                  std::to_string(device_index) + "; pass -1 to use the rank's GPU and streams");
    return std::make_unique<cuda::CudaDevice>(rec, gpu, kernel);
  }
  const GpuProbe p = probe_gpus();
  if (!p.problem.empty()) throw probe_error(p, "");
  const int index = device_index < 0 ? 0 : device_index;
  if (index >= static_cast<int>(p.gpus.size()))
    throw Error("GPU " + std::to_string(index) + " was asked for, but " + std::to_string(p.gpus.size()) +
                " GPU(s) are visible; use a device index below " + std::to_string(p.gpus.size()));
  auto gpu = std::make_shared<cuda::RankGpu>(index, rec.rank(), std::chrono::seconds(120));
  return std::make_unique<cuda::CudaDevice>(rec, std::move(gpu), kernel);
}

CPSIM_DEVICE(cuda) {
  info.name = "cuda";
  info.dtypes = {DType::bf16, DType::f32};
  info.gpu = true;
  info.any_mask = false;  // the kernels implement the causal and full masks (cuda_device.hpp)
  for (GpuKernel k : {GpuKernel::mma2, GpuKernel::mma1, GpuKernel::simt}) info.kernels.push_back(gpu_kernel_name(k));
  info.kernel_problem = [](const std::string& kernel, DType dtype, std::int64_t head_dim) {
    return gpu_kernel_problem(parse_gpu_kernel(kernel), dtype, head_dim);
  };
  info.make = [](Recorder& rec, const DeviceSettings& settings) {
    return make_cuda_device(rec, -1, parse_gpu_kernel(settings.kernel));  // the launcher's GPU and streams
  };
}

}  // namespace cpsim
