// Attention on the CUDA cores, f32 arithmetic: the kernels for f32 runs (where the check is tight) and for head dims
// the tensor-core kernels do not take. One warp per row; lane x holds head-dim values x, x+32, x+64, ...
//
// Forward, one warp per query row i (keys it sees: a prefix, positions ascending), 32 keys at a time:
//   s_j = scale q.k_j (lane j keeps s_j);  m' = max(m, max_j s_j);  l = exp(m - m') l + sum_j exp(s_j - m')
//   acc = exp(m - m') acc + sum_j exp(s_j - m') v_j;   out = acc / l, lse = m + log l (no key: 0, -inf)
// Backward in two passes, so that nothing is added atomically and the result does not depend on timing:
//   dq pass, one warp per query row i:   dq_i += sum_j ds_ij k_j
//   dk/dv pass, one warp per key row j:  dv_j += sum_i p_ij dout_i,  dk_j += sum_i ds_ij q_i  (over the group's heads)
//   with p_ij = exp(scale q_i.k_j - lse_i), dp_ij = dout_i.v_j, ds_ij = scale p_ij (dp_ij - Di), Di = dout_i.out_i.
#include "sim/cuda/kernels/common.cuh"

namespace cpsim::cuda {
namespace {

constexpr int kWarps = 4;  // rows per block
constexpr unsigned kAll = 0xffffffffu;

template <class T, int kPer>
__device__ __forceinline__ void load_row(float (&x)[kPer], const T* p, int D) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int c = 0; c < kPer; ++c) x[c] = lane + 32 * c < D ? to_f32(p[lane + 32 * c]) : 0.f;
}

template <class T, int kPer>
__device__ __forceinline__ float dot_row(const float (&x)[kPer], const T* p, int D) {
  const int lane = threadIdx.x & 31;
  float acc = 0.f;
#pragma unroll
  for (int c = 0; c < kPer; ++c)
    if (lane + 32 * c < D) acc += x[c] * to_f32(p[lane + 32 * c]);
  return warp_sum(acc);
}

template <int kPer>
__device__ __forceinline__ void add_row(float* p, const float (&x)[kPer], int D) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int c = 0; c < kPer; ++c)
    if (lane + 32 * c < D) p[lane + 32 * c] += x[c];
}

template <class T, int kPer>
__global__ void __launch_bounds__(32 * kWarps) forward_simt(AttentionArgs a) {
  const int lane = threadIdx.x & 31;
  const int i = blockIdx.x * kWarps + (threadIdx.x >> 5), h = blockIdx.y, b = blockIdx.z;
  if (i >= a.q.ns) return;
  const int kvh = h / a.group, D = a.q.d;
  float q[kPer], acc[kPer];
  load_row<T, kPer>(q, at<const T>(a.q, b, i, h), D);
#pragma unroll
  for (int c = 0; c < kPer; ++c) acc[c] = 0.f;
  const int n_keys = a.causal ? upper_bound_pos(a.k_pos, a.k.ns, a.q_pos[i]) : a.k.ns;
  float m = neg_inf(), l = 0.f;
  for (int j0 = 0; j0 < n_keys; j0 += 32) {
    const int n = min(32, n_keys - j0);
    float s = neg_inf();  // lane jj: the score of key j0 + jj
    for (int jj = 0; jj < n; ++jj) {
      const float x = dot_row<T, kPer>(q, at<const T>(a.k, b, j0 + jj, kvh), D) * a.scale;
      if (lane == jj) s = x;
    }
    const float m_new = fmaxf(m, warp_max(s));  // finite: the chunk holds at least one visible key
    const float alpha = expf(m - m_new);
    const float p = expf(s - m_new);
    l = alpha * l + warp_sum(p);
#pragma unroll
    for (int c = 0; c < kPer; ++c) acc[c] *= alpha;
    for (int jj = 0; jj < n; ++jj) {
      const float pj = __shfl_sync(kAll, p, jj);
      const T* v = at<const T>(a.v, b, j0 + jj, kvh);
#pragma unroll
      for (int c = 0; c < kPer; ++c)
        if (lane + 32 * c < D) acc[c] += pj * to_f32(v[lane + 32 * c]);
    }
    m = m_new;
  }
  T* out = at<T>(a.out, b, i, h);
  const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
  for (int c = 0; c < kPer; ++c)
    if (lane + 32 * c < D) out[lane + 32 * c] = from_f32<T>(acc[c] * inv);
  if (lane == 0) *at<float>(a.lse, b, i, h) = l > 0.f ? m + logf(l) : neg_inf();
}

// Di = rowsum(dout * out) for every query row: [nb, nh, ns] into a.di (both backward paths use it).
template <class T>
__global__ void __launch_bounds__(32 * kWarps) row_dot(AttentionArgs a) {
  const int i = blockIdx.x * kWarps + (threadIdx.x >> 5), h = blockIdx.y, b = blockIdx.z;
  if (i >= a.q.ns) return;
  const int lane = threadIdx.x & 31, D = a.q.d;
  const T* o = at<const T>(a.out, b, i, h);
  const T* g = at<const T>(a.dout, b, i, h);
  float acc = 0.f;
  for (int x = lane; x < D; x += 32) acc += to_f32(o[x]) * to_f32(g[x]);
  acc = warp_sum(acc);
  if (lane == 0) a.di[(static_cast<std::int64_t>(b) * a.q.nh + h) * a.q.ns + i] = acc;
}

template <class T, int kPer>
__global__ void __launch_bounds__(32 * kWarps) backward_dq_simt(AttentionArgs a) {
  const int i = blockIdx.x * kWarps + (threadIdx.x >> 5), h = blockIdx.y, b = blockIdx.z;
  if (i >= a.q.ns) return;
  const float lse = *at<const float>(a.lse, b, i, h);
  if (lse == neg_inf()) return;  // the row sees no key anywhere: no gradient
  const int kvh = h / a.group, D = a.q.d, lane = threadIdx.x & 31;
  const float di = a.di[(static_cast<std::int64_t>(b) * a.q.nh + h) * a.q.ns + i];
  float q[kPer], g[kPer], dq[kPer];
  load_row<T, kPer>(q, at<const T>(a.q, b, i, h), D);
  load_row<T, kPer>(g, at<const T>(a.dout, b, i, h), D);
#pragma unroll
  for (int c = 0; c < kPer; ++c) dq[c] = 0.f;
  const int n_keys = a.causal ? upper_bound_pos(a.k_pos, a.k.ns, a.q_pos[i]) : a.k.ns;
  for (int j = 0; j < n_keys; ++j) {
    const T* k = at<const T>(a.k, b, j, kvh);
    const float p = expf(dot_row<T, kPer>(q, k, D) * a.scale - lse);
    const float ds = a.scale * p * (dot_row<T, kPer>(g, at<const T>(a.v, b, j, kvh), D) - di);
#pragma unroll
    for (int c = 0; c < kPer; ++c)
      if (lane + 32 * c < D) dq[c] += ds * to_f32(k[lane + 32 * c]);
  }
  add_row<kPer>(at<float>(a.dq, b, i, h), dq, D);
}

template <class T, int kPer>
__global__ void __launch_bounds__(32 * kWarps) backward_dkv_simt(AttentionArgs a) {
  const int j = blockIdx.x * kWarps + (threadIdx.x >> 5), kvh = blockIdx.y, b = blockIdx.z;
  if (j >= a.k.ns) return;
  const int D = a.q.d, lane = threadIdx.x & 31, sq = a.q.ns;
  float k[kPer], v[kPer], dk[kPer], dv[kPer];
  load_row<T, kPer>(k, at<const T>(a.k, b, j, kvh), D);
  load_row<T, kPer>(v, at<const T>(a.v, b, j, kvh), D);
#pragma unroll
  for (int c = 0; c < kPer; ++c) dk[c] = dv[c] = 0.f;
  const int i_start = a.causal ? lower_bound_pos(a.q_pos, sq, a.k_pos[j]) : 0;
  for (int hh = 0; hh < a.group; ++hh) {
    const int h = kvh * a.group + hh;
    for (int i = i_start; i < sq; ++i) {
      const float lse = *at<const float>(a.lse, b, i, h);
      if (lse == neg_inf()) continue;
      const T* q = at<const T>(a.q, b, i, h);
      const T* g = at<const T>(a.dout, b, i, h);
      const float p = expf(dot_row<T, kPer>(k, q, D) * a.scale - lse);
      const float di = a.di[(static_cast<std::int64_t>(b) * a.q.nh + h) * sq + i];
      const float ds = a.scale * p * (dot_row<T, kPer>(v, g, D) - di);
#pragma unroll
      for (int c = 0; c < kPer; ++c)
        if (lane + 32 * c < D) {
          dv[c] += p * to_f32(g[lane + 32 * c]);
          dk[c] += ds * to_f32(q[lane + 32 * c]);
        }
    }
  }
  add_row<kPer>(at<float>(a.dk, b, j, kvh), dk, D);
  add_row<kPer>(at<float>(a.dv, b, j, kvh), dv, D);
}

dim3 rows_grid(int rows, int heads, int batch) {
  return dim3((rows + kWarps - 1) / kWarps, heads, batch);
}

template <class T, int kPer>
cudaError_t forward_typed(const AttentionArgs& a, cudaStream_t s) {
  forward_simt<T, kPer><<<rows_grid(a.q.ns, a.q.nh, a.q.nb), 32 * kWarps, 0, s>>>(a);
  return cudaGetLastError();
}

template <class T, int kPer>
cudaError_t backward_typed(const AttentionArgs& a, cudaStream_t s) {
  backward_dq_simt<T, kPer><<<rows_grid(a.q.ns, a.q.nh, a.q.nb), 32 * kWarps, 0, s>>>(a);
  backward_dkv_simt<T, kPer><<<rows_grid(a.k.ns, a.k.nh, a.k.nb), 32 * kWarps, 0, s>>>(a);
  return cudaGetLastError();
}

// Calls fn.template operator()<T, kPer>() for the storage type and head dim of the call.
template <class Fn>
cudaError_t dispatch(const AttentionArgs& a, Fn&& fn) {
  const int D = a.q.d;
  if (D < 1 || D > kSimtMaxHeadDim) return cudaErrorInvalidValue;
  auto by_dim = [&](auto zero) -> cudaError_t {
    using T = decltype(zero);
    if (D <= 32) return fn.template operator()<T, 1>();
    if (D <= 64) return fn.template operator()<T, 2>();
    if (D <= 128) return fn.template operator()<T, 4>();
    return fn.template operator()<T, 8>();
  };
  if (a.q.type == ElemType::f32) return by_dim(float{});
  if (a.q.type == ElemType::bf16) return by_dim(bf16{});
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t launch_forward_simt(const AttentionArgs& a, cudaStream_t s) {
  return dispatch(a, [&]<class T, int kPer>() { return forward_typed<T, kPer>(a, s); });
}

cudaError_t launch_row_dot(const AttentionArgs& a, cudaStream_t s) {
  if (a.q.type == ElemType::f32)
    row_dot<float><<<rows_grid(a.q.ns, a.q.nh, a.q.nb), 32 * kWarps, 0, s>>>(a);
  else if (a.q.type == ElemType::bf16)
    row_dot<bf16><<<rows_grid(a.q.ns, a.q.nh, a.q.nb), 32 * kWarps, 0, s>>>(a);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t launch_backward_simt(const AttentionArgs& a, cudaStream_t s) {
  return dispatch(a, [&]<class T, int kPer>() { return backward_typed<T, kPer>(a, s); });
}

}  // namespace cpsim::cuda
