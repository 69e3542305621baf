// Which kernels take an attention call, and the calls themselves.
#include <cstdint>

#include "sim/cuda/kernels/launch.hpp"

namespace cpsim::cuda {

cudaError_t launch_forward_mma2(const AttentionArgs& a, cudaStream_t s);   // attention_mma2_fwd.cu
cudaError_t launch_backward_mma2(const AttentionArgs& a, cudaStream_t s);  // attention_mma2_bwd.cu
cudaError_t launch_forward_mma(const AttentionArgs& a, cudaStream_t s);    // attention_mma_fwd.cu (mma1)
cudaError_t launch_backward_mma(const AttentionArgs& a, cudaStream_t s);   // attention_mma_bwd.cu (mma1)
cudaError_t launch_forward_simt(const AttentionArgs& a, cudaStream_t s);   // attention_simt.cu
cudaError_t launch_backward_simt(const AttentionArgs& a, cudaStream_t s);
cudaError_t launch_row_dot(const AttentionArgs& a, cudaStream_t s);

namespace {
// The tensor-core kernels read rows with 16-byte copies: rows must start on 16 bytes.
bool rows_aligned(const GpuView& v) {
  return reinterpret_cast<std::uintptr_t>(v.ptr) % 16 == 0 && v.row_stride % 8 == 0 && v.batch_stride % 8 == 0 &&
         v.head_stride % 8 == 0;
}
// The f32 gradients take 8-byte (float2) accesses: pairs must start on 8 bytes.
bool pairs_aligned(const GpuView& v) {
  return reinterpret_cast<std::uintptr_t>(v.ptr) % 8 == 0 && v.row_stride % 2 == 0 && v.batch_stride % 2 == 0 &&
         v.head_stride % 2 == 0;
}
}  // namespace

const char* path_name(AttentionPath p) {
  switch (p) {
    case AttentionPath::mma2:
      return "mma2";
    case AttentionPath::mma1:
      return "mma1";
    case AttentionPath::simt:
      return "simt";
  }
  return "?";
}

bool mma_takes(const AttentionArgs& a, bool backward) {
  const bool bf16_in = a.q.type == ElemType::bf16 && a.k.type == ElemType::bf16 && a.v.type == ElemType::bf16 &&
                       a.out.type == ElemType::bf16 && rows_aligned(a.q) && rows_aligned(a.k) && rows_aligned(a.v);
  const bool dims = a.q.d == 64 || a.q.d == 128;
  bool ok = bf16_in && dims && a.lse.type == ElemType::f32;
  if (backward)
    ok = ok && a.dout.type == ElemType::bf16 && rows_aligned(a.dout) && a.dq.type == ElemType::f32 &&
         a.dk.type == ElemType::f32 && a.dv.type == ElemType::f32 && pairs_aligned(a.dq) && pairs_aligned(a.dk) &&
         pairs_aligned(a.dv);
  return ok;
}

cudaError_t launch_attention_forward(const AttentionArgs& a, AttentionPath path, cudaStream_t s) {
  switch (path) {
    case AttentionPath::mma2:
      return launch_forward_mma2(a, s);
    case AttentionPath::mma1:
      return launch_forward_mma(a, s);
    case AttentionPath::simt:
      return launch_forward_simt(a, s);
  }
  return cudaErrorInvalidValue;
}

cudaError_t launch_attention_backward(const AttentionArgs& a, AttentionPath path, cudaStream_t s) {
  const cudaError_t e = launch_row_dot(a, s);  // Di = rowsum(dout * out), read by every path
  if (e != cudaSuccess) return e;
  switch (path) {
    case AttentionPath::mma2:
      return launch_backward_mma2(a, s);
    case AttentionPath::mma1:
      return launch_backward_mma(a, s);
    case AttentionPath::simt:
      return launch_backward_simt(a, s);
  }
  return cudaErrorInvalidValue;
}

}  // namespace cpsim::cuda
