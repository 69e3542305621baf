// The CUDA/NCCL backend as the rest of cpsim sees it: plain C++, no CUDA header, compiled only when
// CPSIM_HAVE_CUDA is defined (CMake option CPSIM_WITH_CUDA). docs/gpu.md tells the whole story.
//
//   cuda_runtime_problem()    "" when a usable GPU is present, else why not, in words
//   launch_cuda_threads()     C ranks as host threads sharing one GPU (--backend cuda-threads)
//   launch_nccl()             one process per GPU, NCCL between them (--backend nccl)
//   make_cuda_device()        a rank's Device: bf16 and f32 buffers in GPU memory, tensor-core attention
//                             (which kernels: GpuKernel, sim/cuda/gpu_kernel.hpp)
// A rank started by either launcher must create its device with make_cuda_device(rec) (device_index -1): the device
// then shares the GPU and the streams the launcher gave the rank, which is how communication is ordered against
// compute (docs/gpu.md, "Streams").
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/comm/launcher.hpp"
#include "sim/core/dtype.hpp"
#include "sim/cuda/gpu_kernel.hpp"
#include "sim/kernels/device.hpp"

namespace cpsim {

// What the machine offers. Probing never initialises CUDA in the calling process (it runs in a short-lived child
// process), so that launch_nccl may still fork its ranks afterwards.
struct GpuInfo {
  std::string name;
  int major = 0, minor = 0;  // compute capability
  std::int64_t memory_bytes = 0;
};
struct GpuProbe {
  std::string problem;        // "" when at least one usable GPU is present
  int driver_version = 0;     // e.g. 13000 for CUDA 13.0; 0 when no driver is installed
  int runtime_version = 0;    // the CUDA runtime cpsim was built with
  std::vector<GpuInfo> gpus;  // the visible GPUs (CUDA_VISIBLE_DEVICES applies)
};
GpuProbe probe_gpus();
std::string cuda_runtime_problem();

// The device of one rank. device_index -1: on a rank started by launch_cuda_threads / launch_nccl, the rank's GPU
// and streams; elsewhere GPU 0 with streams of its own. Throws Error naming the cause when no GPU is usable.
std::unique_ptr<Device> make_cuda_device(Recorder& rec, int device_index = -1, GpuKernel kernel = GpuKernel::automatic);

// All C ranks on one GPU, as threads of this process, each with its own streams; messages are device-to-device
// copies ordered by events. Any C >= 1 (memory permitting).
std::vector<RankOutcome> launch_cuda_threads(const LaunchOptions& opt, const RankFn& fn);

// One process per GPU. On one machine (no launcher environment): forks C processes, rank r on GPU r, sharing the
// NCCL id through shared memory; needs C GPUs and a process that has not used CUDA yet. Under mpirun or srun
// (docs/gpu.md: CPSIM_RANK / OMPI_COMM_WORLD_RANK / SLURM_PROCID ...), this process is one rank; the NCCL id comes
// from NCCL_COMM_ID or a file named by CPSIM_NCCL_ID_FILE. Outcomes return on rank 0 (others get an empty vector).
std::vector<RankOutcome> launch_nccl(const LaunchOptions& opt, const RankFn& fn);

// The tolerance a GPU run is checked with, element by element: |got - want| <= atol + rtol * |want|.
//   bf16: Transformer Engine's context-parallel test tolerances, atol = rtol = 2.5e-2 (3.5e-2 with GQA)
//   f32:  atol = 1e-5, rtol = 1e-4 (about 100x the rounding an f32 kernel shows at the checked sizes)
struct GpuTolerance {
  double atol = 0, rtol = 0;
  std::string rule;  // in words, for the report
};
GpuTolerance gpu_tolerance(DType dtype, bool gqa);

struct CloseCheck {
  double max_abs_error = 0;  // max |got - want| (equal infinities count 0; NaN or a lone infinity: +inf)
  double worst_ratio = 0;    // max |got - want| / (atol + rtol |want|): passed when <= 1
  double allowed = 0;        // atol + rtol * max|want|: the error allowed at the largest reference value
  bool passed = false;
};
CloseCheck check_close(const std::vector<double>& got, const std::vector<double>& want, const GpuTolerance& tol);

// bf16 on the host: round to nearest even (as the GPU's __float2bfloat16_rn), and back.
std::uint16_t to_bf16_bits(double x);
double from_bf16_bits(std::uint16_t b);
inline double round_to_bf16(double x) {
  return from_bf16_bits(to_bf16_bits(x));
}

// Host values (double) in and out of a device buffer of dtype bf16, f32 or f64 (rounded on the way in).
void upload_doubles(Device& dev, const Buffer& dst, const std::vector<double>& values);
std::vector<double> download_doubles(Device& dev, const Buffer& src);

// `cpsim bench gpu_attention`: one causal attention forward and backward on one GPU, and a cuBLAS bf16 GEMM.
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
