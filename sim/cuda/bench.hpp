// `cpsim bench gpu_attention`'s measurements: one causal attention forward and backward on one GPU, and a cuBLAS
// bf16 GEMM as the yardstick (bench.cpp). Plain C++ (no CUDA header).
#pragma once
#include <cstdint>
#include <string>

#include "sim/core/dtype.hpp"
#include "sim/cuda/gpu_kernel.hpp"

namespace cpsim {

struct GpuAttentionTiming {
  double fwd_ms = 0, bwd_ms = 0;        // best of the repetitions, kernel time (CUDA events)
  double fwd_flops = 0, bwd_flops = 0;  // useful flops (Device::attention_*: 4 D and 10 D per visible pair)
  std::string fwd_path, bwd_path;       // which kernel ran ("mma2", "mma1" or "simt")
};
struct GpuAttentionShape {
  std::int64_t seq = 0, heads = 0, kv_heads = 0, head_dim = 0;  // B = 1
  DType dtype = DType::bf16;
};
GpuAttentionTiming time_gpu_attention(const GpuAttentionShape& shape, GpuKernel kernel, int repetitions,
                                      int device_index = 0);
// TFLOP/s of C = A B (bf16 in, f32 accumulate) for n x n x n, best of a few runs; throws Error naming the cause
// when cuBLAS cannot be loaded.
double cublas_bf16_gemm_tflops(std::int64_t n, int device_index = 0);

}  // namespace cpsim
