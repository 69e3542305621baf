// The CUDA device of one rank (registered as device "cuda": bf16 and f32 buffers in GPU memory, tensor-core
// attention; which kernels: GpuKernel, gpu_kernel.hpp). Plain C++ (no CUDA header).
#pragma once
#include <memory>

#include "sim/cuda/gpu_kernel.hpp"
#include "sim/kernels/device.hpp"

namespace cpsim {

// device_index -1: on a rank started by launch_cuda_threads / launch_nccl, the rank's GPU and streams; elsewhere
// GPU 0 with streams of its own. Throws Error naming the cause when no GPU is usable.
std::unique_ptr<Device> make_cuda_device(Recorder& rec, int device_index = -1, GpuKernel kernel = GpuKernel::automatic);

}  // namespace cpsim
