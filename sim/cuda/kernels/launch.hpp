// The kernels' side of the CUDA device: plain descriptions of views and calls, no cpsim types, so that the .cu
// files need nothing but CUDA and this header. The host side (cuda_device.cpp) turns cpsim Views into GpuViews.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace cpsim::cuda {

enum class ElemType : int { f32, bf16, f64, i64 };

// A box (nb batches, ns rows, nh heads, d values) of a buffer, strides in elements.
//   [B, S, N, D] activations: element (b, s, h, x) at ptr + b*batch_stride + s*row_stride + h*head_stride + x
//                             (row_stride = N*D, head_stride = D: the box's heads of one row are contiguous)
//   [B, N, S] log-sum-exp:    the same formula with d = 1, row_stride = 1, head_stride = S
//                             (heads_inner = false: the box's rows of one head are contiguous)
struct GpuView {
  void* ptr = nullptr;  // element (b0, s0, h0, 0) of the buffer
  std::int64_t batch_stride = 0, row_stride = 0, head_stride = 0;
  int nb = 0, ns = 0, nh = 0, d = 1;
  ElemType type = ElemType::f32;
  bool heads_inner = true;
};

// One attention call. Forward reads q, k, v and writes out, lse; backward reads q, k, v, out, lse, dout and ADDS
// into dq, dk, dv. Query head h reads KV head h / group. Positions are ascending global token indices.
struct AttentionArgs {
  GpuView q, k, v, out, lse;
  GpuView dout, dq, dk, dv;
  const std::int64_t* q_pos = nullptr;  // device memory, q.ns values
  const std::int64_t* k_pos = nullptr;  // device memory, k.ns values
  float* di = nullptr;                  // backward scratch: rowsum(dout * out), [q.nb, q.nh, q.ns]
  float* dk_part = nullptr;             // backward scratch of mma2 with GQA (group > 1): each query head's dK and
  float* dv_part = nullptr;             //   dV before the group sum, [q.nb, k.ns, q.nh, d] each
  int group = 1;
  bool causal = true;
  float scale = 1;
};

// The kernels an attention call can run (`--kernel`; docs/gpu.md):
//   mma2: tensor cores (mma.sync m16n8k16, bf16 in, f32 accumulate), 128 query rows per forward block and one
//         backward block per query head (attention_mma2_*.cu). Needs bf16 q, k, v, out (and dout), f32 lse (and
//         f32 dq, dk, dv), head dim 64 or 128, rows on 16 bytes.
//   mma1: the first tensor-core kernels, 64 query rows per forward block and one backward block per KV head
//         (attention_mma_*.cu); the same needs. Kept to check mma2 against and to measure its gain.
//   simt: one warp per row on the CUDA cores, f32 arithmetic; any head dim up to 256, f32 or bf16 storage.
enum class AttentionPath { mma2, mma1, simt };
const char* path_name(AttentionPath p);

// The kernel tiles: the mma kernels take kMmaRows query rows x kMmaRows keys per step (mma2's forward: 2 kMmaRows
// query rows); the simt kernels one row against kSimtKeys keys (forward), one key against kSimtKeys queries
// (backward's dK/dV pass).
inline constexpr int kMmaRows = 64;
inline constexpr int kMma2ForwardRows = 2 * kMmaRows;
inline constexpr int kSimtKeys = 32;
inline constexpr int kSimtMaxHeadDim = 256;

// Whether the tensor-core kernels (mma2 and mma1 alike) take this call.
bool mma_takes(const AttentionArgs& a, bool backward);

cudaError_t launch_attention_forward(const AttentionArgs& a, AttentionPath path, cudaStream_t stream);
cudaError_t launch_attention_backward(const AttentionArgs& a, AttentionPath path, cudaStream_t stream);

// Elementwise ops on views of one extent and layout (types may differ: values convert through f32, or f64 when
// both sides are f64).
cudaError_t launch_fill(const GpuView& dst, double value, cudaStream_t stream);
cudaError_t launch_copy(const GpuView& dst, const GpuView& src, cudaStream_t stream);
cudaError_t launch_add(const GpuView& dst, const GpuView& src, cudaStream_t stream);
// Uniform values in [-1, 1) from a hash of (seed, element index): benchmark inputs without a host round trip.
cudaError_t launch_fill_random(const GpuView& dst, std::uint64_t seed, cudaStream_t stream);
// out_acc, lse_acc <- logaddexp merge with out_t, lse_t (lse views f32; out views f32 or bf16).
cudaError_t launch_merge(const GpuView& out_acc, const GpuView& lse_acc, const GpuView& out_t, const GpuView& lse_t,
                         cudaStream_t stream);

// dst[i] = op(dst[i], src[i]) for i < n: what the communicators' reductions run.
enum class ReduceKind { sum, max, min };
cudaError_t launch_accumulate(void* dst, const void* src, std::int64_t n, ElemType type, ReduceKind op,
                              cudaStream_t stream);

}  // namespace cpsim::cuda
