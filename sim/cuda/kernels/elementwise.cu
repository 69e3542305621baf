// fill, copy (with dtype conversion), add, the LSE merge, and the communicators' reductions.
//
// A view is walked as (outer rows) x (a contiguous run): [B, S, N, D] boxes as B*S rows of nh*D values (the box's
// heads of one row are adjacent), [B, N, S] boxes as B*N rows of ns values. One block per row.
#include "sim/cuda/kernels/common.cuh"

namespace cpsim::cuda {
namespace {

struct Rows {
  std::int64_t count, inner, n1, stride0, stride1;
};

__host__ __device__ inline Rows rows_of(const GpuView& v) {
  if (v.heads_inner)
    return {static_cast<std::int64_t>(v.nb) * v.ns, static_cast<std::int64_t>(v.nh) * v.d, v.ns, v.batch_stride,
            v.row_stride};
  return {static_cast<std::int64_t>(v.nb) * v.nh, v.ns, v.nh, v.batch_stride, v.head_stride};
}

__device__ inline std::int64_t row_offset(const Rows& r, std::int64_t row) {
  const std::int64_t i0 = row / r.n1;
  return i0 * r.stride0 + (row - i0 * r.n1) * r.stride1;
}

dim3 block_for(const Rows& r) {
  const std::int64_t t = (r.inner + 31) / 32 * 32;
  return dim3(static_cast<unsigned>(t < 32 ? 32 : (t > 256 ? 256 : t)));
}

template <class T>
__device__ inline T convert(float x);
template <>
__device__ inline float convert<float>(float x) {
  return x;
}
template <>
__device__ inline bf16 convert<bf16>(float x) {
  return __float2bfloat16_rn(x);
}

template <class T>
__global__ void fill_kernel(GpuView dst, Rows r, float value) {
  T* p = static_cast<T*>(dst.ptr) + row_offset(r, blockIdx.x);
  const T x = convert<T>(value);
  for (std::int64_t c = threadIdx.x; c < r.inner; c += blockDim.x) p[c] = x;
}

template <class T>
__global__ void random_kernel(GpuView dst, Rows r, std::uint64_t seed) {
  T* p = static_cast<T*>(dst.ptr) + row_offset(r, blockIdx.x);
  for (std::int64_t c = threadIdx.x; c < r.inner; c += blockDim.x) {
    std::uint64_t x = seed ^ (static_cast<std::uint64_t>(blockIdx.x) * r.inner + c) * 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;  // splitmix64's finaliser
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    p[c] = convert<T>(static_cast<float>(x >> 40) * (2.f / 16777216.f) - 1.f);
  }
}

// dst = src (add = false) or dst += src (add = true), through f32.
template <class TD, class TS>
__global__ void copy_kernel(GpuView dst, Rows rd, GpuView src, Rows rs, bool add) {
  TD* d = static_cast<TD*>(dst.ptr) + row_offset(rd, blockIdx.x);
  const TS* s = static_cast<const TS*>(src.ptr) + row_offset(rs, blockIdx.x);
  for (std::int64_t c = threadIdx.x; c < rd.inner; c += blockDim.x) {
    const float x = to_f32(s[c]);
    d[c] = convert<TD>(add ? to_f32(d[c]) + x : x);
  }
}

// One warp per (b, s, h) row:  lse = max + log1p(exp(min - max));  out = exp(lse_a - lse) out_a + exp(lse_t - lse)
// out_t.
template <class T>
__global__ void merge_kernel(GpuView out_a, GpuView lse_a, GpuView out_t, GpuView lse_t) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * 4 + (threadIdx.x >> 5);
  const std::int64_t per_batch = static_cast<std::int64_t>(out_a.ns) * out_a.nh;
  if (row >= per_batch * out_a.nb) return;
  const int b = static_cast<int>(row / per_batch), s = static_cast<int>(row % per_batch / out_a.nh),
            h = static_cast<int>(row % out_a.nh);
  float* la = at<float>(lse_a, b, s, h);
  const float x = *la, y = *at<const float>(lse_t, b, s, h);
  if (y == neg_inf()) return;  // nothing to add (also when both are -inf): out_a, lse_a unchanged
  const float hi = fmaxf(x, y), lo = fminf(x, y);
  const float lse = hi + log1pf(expf(lo - hi));
  const float wa = expf(x - lse), wt = expf(y - lse);
  T* oa = at<T>(out_a, b, s, h);
  const T* ot = at<const T>(out_t, b, s, h);
  for (int c = threadIdx.x & 31; c < out_a.d; c += 32) {
    const float t = wt * to_f32(ot[c]);
    oa[c] = convert<T>(wa == 0.f ? t : wa * to_f32(oa[c]) + t);  // the accumulator held no weight yet: t alone
  }
  __syncwarp();
  if ((threadIdx.x & 31) == 0) *la = lse;
}

template <class T, ReduceKind op>
__global__ void accumulate_kernel(T* dst, const T* src, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    if constexpr (op == ReduceKind::sum) dst[i] = dst[i] + src[i];
    if constexpr (op == ReduceKind::max) dst[i] = dst[i] < src[i] ? src[i] : dst[i];
    if constexpr (op == ReduceKind::min) dst[i] = src[i] < dst[i] ? src[i] : dst[i];
  }
}

__global__ void accumulate_bf16(bf16* dst, const bf16* src, std::int64_t n, ReduceKind op) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float a = to_f32(dst[i]), b = to_f32(src[i]);
    dst[i] = convert<bf16>(op == ReduceKind::sum ? a + b : op == ReduceKind::max ? fmaxf(a, b) : fminf(a, b));
  }
}

// Calls fn(T{}) for the f32 and bf16 storage types.
template <class Fn>
cudaError_t by_type(ElemType t, Fn&& fn) {
  if (t == ElemType::f32) return fn(float{});
  if (t == ElemType::bf16) return fn(bf16{});
  return cudaErrorInvalidValue;
}

template <class T, ReduceKind op>
cudaError_t accumulate_typed(void* dst, const void* src, std::int64_t n, cudaStream_t s) {
  const unsigned blocks = static_cast<unsigned>(n / 256 + 1 < 4096 ? n / 256 + 1 : 4096);
  accumulate_kernel<T, op><<<blocks, 256, 0, s>>>(static_cast<T*>(dst), static_cast<const T*>(src), n);
  return cudaGetLastError();
}

template <class T>
cudaError_t accumulate_op(void* dst, const void* src, std::int64_t n, ReduceKind op, cudaStream_t s) {
  if (op == ReduceKind::sum) return accumulate_typed<T, ReduceKind::sum>(dst, src, n, s);
  if (op == ReduceKind::max) return accumulate_typed<T, ReduceKind::max>(dst, src, n, s);
  return accumulate_typed<T, ReduceKind::min>(dst, src, n, s);
}

}  // namespace

cudaError_t launch_fill(const GpuView& dst, double value, cudaStream_t s) {
  const Rows r = rows_of(dst);
  if (r.count == 0 || r.inner == 0) return cudaSuccess;
  return by_type(dst.type, [&](auto zero) {
    fill_kernel<decltype(zero)>
        <<<static_cast<unsigned>(r.count), block_for(r), 0, s>>>(dst, r, static_cast<float>(value));
    return cudaGetLastError();
  });
}

cudaError_t launch_fill_random(const GpuView& dst, std::uint64_t seed, cudaStream_t s) {
  const Rows r = rows_of(dst);
  if (r.count == 0 || r.inner == 0) return cudaSuccess;
  return by_type(dst.type, [&](auto zero) {
    random_kernel<decltype(zero)><<<static_cast<unsigned>(r.count), block_for(r), 0, s>>>(dst, r, seed);
    return cudaGetLastError();
  });
}

static cudaError_t copy_or_add(const GpuView& dst, const GpuView& src, bool add, cudaStream_t s) {
  const Rows rd = rows_of(dst), rs = rows_of(src);
  if (rd.count != rs.count || rd.inner != rs.inner) return cudaErrorInvalidValue;
  if (rd.count == 0 || rd.inner == 0) return cudaSuccess;
  return by_type(dst.type, [&](auto dz) {
    return by_type(src.type, [&](auto sz) {
      copy_kernel<decltype(dz), decltype(sz)>
          <<<static_cast<unsigned>(rd.count), block_for(rd), 0, s>>>(dst, rd, src, rs, add);
      return cudaGetLastError();
    });
  });
}

cudaError_t launch_copy(const GpuView& dst, const GpuView& src, cudaStream_t s) {
  return copy_or_add(dst, src, false, s);
}
cudaError_t launch_add(const GpuView& dst, const GpuView& src, cudaStream_t s) {
  return copy_or_add(dst, src, true, s);
}

cudaError_t launch_merge(const GpuView& out_a, const GpuView& lse_a, const GpuView& out_t, const GpuView& lse_t,
                         cudaStream_t s) {
  if (lse_a.type != ElemType::f32 || lse_t.type != ElemType::f32 || out_a.type != out_t.type)
    return cudaErrorInvalidValue;
  const std::int64_t rows = static_cast<std::int64_t>(out_a.nb) * out_a.ns * out_a.nh;
  if (rows == 0) return cudaSuccess;
  return by_type(out_a.type, [&](auto zero) {
    merge_kernel<decltype(zero)><<<static_cast<unsigned>((rows + 3) / 4), 128, 0, s>>>(out_a, lse_a, out_t, lse_t);
    return cudaGetLastError();
  });
}

cudaError_t launch_accumulate(void* dst, const void* src, std::int64_t n, ElemType type, ReduceKind op,
                              cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  switch (type) {
    case ElemType::f32:
      return accumulate_op<float>(dst, src, n, op, s);
    case ElemType::f64:
      return accumulate_op<double>(dst, src, n, op, s);
    case ElemType::i64:
      return accumulate_op<std::int64_t>(dst, src, n, op, s);
    case ElemType::bf16: {
      const unsigned blocks = static_cast<unsigned>(n / 256 + 1 < 4096 ? n / 256 + 1 : 4096);
      accumulate_bf16<<<blocks, 256, 0, s>>>(static_cast<bf16*>(dst), static_cast<const bf16*>(src), n, op);
      return cudaGetLastError();
    }
  }
  return cudaErrorInvalidValue;
}

}  // namespace cpsim::cuda
