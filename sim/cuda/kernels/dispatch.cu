// Which kernel computes an attention call, and the calls themselves.
#include <cstdint>

#include "sim/cuda/kernels/launch.hpp"

namespace cpsim::cuda {

cudaError_t launch_forward_mma(const AttentionArgs& a, cudaStream_t s);   // attention_mma_fwd.cu
cudaError_t launch_backward_mma(const AttentionArgs& a, cudaStream_t s);  // attention_mma_bwd.cu
cudaError_t launch_forward_simt(const AttentionArgs& a, cudaStream_t s);  // attention_simt.cu
cudaError_t launch_backward_simt(const AttentionArgs& a, cudaStream_t s);
cudaError_t launch_row_dot(const AttentionArgs& a, cudaStream_t s);

namespace {
// The tensor-core kernels read rows with 16-byte copies: rows must start on 16 bytes.
bool rows_aligned(const GpuView& v) {
  return reinterpret_cast<std::uintptr_t>(v.ptr) % 16 == 0 && v.row_stride % 8 == 0 && v.batch_stride % 8 == 0 &&
         v.head_stride % 8 == 0;
}
}  // namespace

AttentionPath choose_path(const AttentionArgs& a, bool backward) {
  const bool bf16_in = a.q.type == ElemType::bf16 && a.k.type == ElemType::bf16 && a.v.type == ElemType::bf16 &&
                       a.out.type == ElemType::bf16 && rows_aligned(a.q) && rows_aligned(a.k) && rows_aligned(a.v);
  const bool dims = a.q.d == 64 || a.q.d == 128;
  bool ok = bf16_in && dims && a.lse.type == ElemType::f32;
  if (backward)
    ok = ok && a.dout.type == ElemType::bf16 && rows_aligned(a.dout) && a.dq.type == ElemType::f32 &&
         a.dk.type == ElemType::f32 && a.dv.type == ElemType::f32;
  return ok ? AttentionPath::mma : AttentionPath::simt;
}

cudaError_t launch_attention_forward(const AttentionArgs& a, AttentionPath path, cudaStream_t s) {
  return path == AttentionPath::mma ? launch_forward_mma(a, s) : launch_forward_simt(a, s);
}

cudaError_t launch_attention_backward(const AttentionArgs& a, AttentionPath path, cudaStream_t s) {
  const cudaError_t e = launch_row_dot(a, s);  // Di = rowsum(dout * out), read by both paths
  if (e != cudaSuccess) return e;
  return path == AttentionPath::mma ? launch_backward_mma(a, s) : launch_backward_simt(a, s);
}

}  // namespace cpsim::cuda
