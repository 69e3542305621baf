// The CUDA device: buffers in GPU memory, attention by the kernels of kernels/ (tensor cores for bf16).
//
//   dtypes   bf16 and f32 storage. An LSE buffer ([B, N, S]) asked for in bf16 is made f32: the log-sum-exp is kept
//            in f32 whenever the inputs are bf16 (Transformer Engine does the same), so the strategies, which ask
//            for their LSE in the inputs' dtype, run unchanged.
//   memory   stream-ordered (cudaMallocAsync / cudaFreeAsync on the compute stream), zero-filled, counted in the
//            rank's MemoryMeter until the last handle is dropped; kernel workspace (positions, Di) is not counted.
//   views    every op honours view offsets and strides (a box of batches, rows and heads; copy, add and fill
//            also a view whose rows step through the buffer, which GpuView's row stride carries).
//   masks    the kernels implement the causal and full masks; a call with documents or a window is refused
//            with an Error (run() refuses such a run before it starts, sim/runtime/run.cpp).
//   ordering fill, copy, add, merge and attention are queued on the compute stream and return without waiting;
//            upload, download and synchronize() block until done. With tracing on, an attention call also waits for
//            its kernels, so that the trace's compute times are kernel times.
//   kernels  the GpuKernel given at construction (--kernel): auto runs mma2 where the tensor cores take the call.
#pragma once
#include <cuda_runtime.h>

#include <array>
#include <memory>
#include <string>

#include "sim/cuda/gpu_kernel.hpp"
#include "sim/cuda/kernels/launch.hpp"
#include "sim/cuda/rank_gpu.hpp"
#include "sim/kernels/device.hpp"

namespace cpsim::cuda {

class CudaDevice final : public Device {
 public:
  CudaDevice(Recorder& rec, std::shared_ptr<RankGpu> gpu, GpuKernel kernel = GpuKernel::automatic);
  ~CudaDevice() override;

  std::string name() const override { return "cuda"; }
  RankGpu& gpu() const { return *gpu_; }

  void upload(const Buffer& dst, const void* host) override;
  void download(const Buffer& src, void* host) override;

  void fill(const View& dst, double value) override;
  void copy(const View& dst, const View& src) override;
  void add(const View& dst, const View& src) override;
  void merge(const View& out_acc, const View& lse_acc, const View& out_t, const View& lse_t) override;
  void synchronize() override;

  // The last attention call: its kernels' time (CUDA events; waits for them to finish) and which kernel ran.
  double last_kernel_ms();
  AttentionPath last_path() const { return last_path_; }

 protected:
  Buffer do_alloc(Dims dims, DType dtype, Layout layout, const std::string& name, BufferUse use) override;
  TileCounts do_attention_forward(const View& q, const Positions& q_pos, const View& k, const View& v,
                                  const Positions& k_pos, const View& out, const View& lse, const Mask& mask,
                                  double scale) override;
  TileCounts do_attention_backward(const View& q, const Positions& q_pos, const View& k, const View& v,
                                   const Positions& k_pos, const View& out, const View& lse, const View& dout,
                                   const View& dq, const View& dk, const View& dv, const Mask& mask,
                                   double scale) override;

 private:
  AttentionArgs args(const View& q, const Positions& q_pos, const View& k, const View& v, const Positions& k_pos,
                     const View& out, const View& lse, bool causal, double scale);
  AttentionPath path_for(const AttentionArgs& a, bool backward) const;
  TileCounts run(AttentionArgs& a, bool backward, const Positions& q_pos, const Positions& k_pos, bool causal);
  void* workspace(void*& ptr, std::size_t& cap, std::size_t bytes);

  std::shared_ptr<RankGpu> gpu_;
  GpuKernel kernel_;
  void* pos_dev_ = nullptr;  // q and k positions, device copy
  std::size_t pos_dev_cap_ = 0;
  // Pinned staging for the positions, one slot per call in flight: a slot is written again only once the copy that
  // read it is done (its event), so the host waits at most for a copy kStaging calls back, never for each call.
  struct Staging {
    std::int64_t* host = nullptr;
    std::size_t cap = 0;
    cudaEvent_t copied = nullptr;
  };
  static constexpr int kStaging = 8;
  std::array<Staging, kStaging> staging_{};
  int next_staging_ = 0;
  void* di_ = nullptr;  // backward: Di per query row
  std::size_t di_cap_ = 0;
  void* part_ = nullptr;  // mma2 backward with GQA: per-query-head dK and dV before the group sum
  std::size_t part_cap_ = 0;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  AttentionPath last_path_ = AttentionPath::simt;
};

// A cpsim View as the kernels see it (throws Error when an extent does not fit the kernels' 32-bit counts).
GpuView to_gpu_view(const View& v);

}  // namespace cpsim::cuda
