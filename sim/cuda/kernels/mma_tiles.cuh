// Tile loads and mma fragment loads shared by the tensor-core forward and backward kernels.
//
// Tiles are rows of D bf16 values in shared memory (kMmaRows rows unless a kernel asks for more), swizzled (swz,
// fragments.hpp, which also says where each lane points ldmatrix). The ways to feed mma.sync (m16n8k16, A row-major
// 16x16, B 16x8 "col"):
//   load_a      A = X[r0..r0+15][16kk..16kk+15]           X a row-major tile (Q, K, V rows)
//   load_b_nk   B[k][n] = Y[n][k]: S = X Y^T              Y a row-major tile whose rows are the n index (K for QK^T)
//               two k-steps at once: {b[0], b[1]} = k-step 2kp, {b[2], b[3]} = k-step 2kp+1, n rows n0..n0+7
//   load_b_kn   B[k][n] = Y[k][n]: O = P Y                Y a row-major tile whose rows are the k index (V for PV)
//               k-step kk (rows 16kk..16kk+15), two n-blocks: {b[0], b[1]} = cols 16dp.., {b[2], b[3]} = 16dp+8..
//   load_a_transposed  A = T^T of a tile T stored [k][m] (the backward's ds^T), read with .trans
// The accumulator of one mma (rows g, g+8; cols 2t, 2t+1) is, after packing to bf16, the A operand of the next
// product over the same columns: C of n-blocks 2kk and 2kk+1 = A of k-step kk (see pack_a).
#pragma once
#include "sim/cuda/kernels/common.cuh"
#include "sim/cuda/kernels/fragments.hpp"

namespace cpsim::cuda {

template <int W>
__device__ __forceinline__ const bf16* lane_ptr(const bf16* tile, RowChunk rc) {
  static_assert(W % 64 == 0, "the swizzle needs at least 8 chunks per row");
  return tile + swz(W, rc.row, rc.chunk);
}

template <int D>
__device__ __forceinline__ void load_a(std::uint32_t (&a)[4], const bf16* tile, int r0, int kk) {
  ldmatrix_x4(a, lane_ptr<D>(tile, a_address(threadIdx.x & 31, r0, kk)));
}

template <int D>
__device__ __forceinline__ void load_b_nk(std::uint32_t (&b)[4], const bf16* tile, int n0, int kp) {
  ldmatrix_x4(b, lane_ptr<D>(tile, b_nk_address(threadIdx.x & 31, n0, kp)));
}

template <int D>
__device__ __forceinline__ void load_b_kn(std::uint32_t (&b)[4], const bf16* tile, int kk, int dp) {
  ldmatrix_x4_trans(b, lane_ptr<D>(tile, b_kn_address(threadIdx.x & 31, kk, dp)));
}

// A = T^T for a tile T of W columns stored [k][m] (the backward's ds^T), warp w's 16 rows of A.
template <int W>
__device__ __forceinline__ void load_a_transposed(std::uint32_t (&a)[4], const bf16* tile, int w, int kk) {
  ldmatrix_x4_trans(a, lane_ptr<W>(tile, at_address(threadIdx.x & 31, w, kk)));
}

// One operand pattern of a tile of W values per row, as the mma2 kernels address it: the tile's shared-memory address
// and this lane's byte offset at the origin (fragments.hpp, lane_bytes), computed once; at(r0, c0) is then the lane's
// ldmatrix address for the fragment at row r0, chunk c0 (an xor and an immediate: tile_bytes).
template <int W>
struct LaneTile {
  std::uint32_t base, lane;
  __device__ __forceinline__ LaneTile(const bf16* tile, RowChunk at_origin)
      : base(smem_addr(tile)), lane(lane_bytes(W, at_origin)) {}
  __device__ __forceinline__ std::uint32_t at(int r0, int c0) const { return base + tile_bytes(W, r0, c0, lane); }
};

// c0 += a b[0..1], c1 += a b[2..3]: one A fragment against the two n-blocks of one ldmatrix.x4 B fragment.
__device__ __forceinline__ void mma_bf16_x2(float (&c0)[4], float (&c1)[4], const std::uint32_t (&a)[4],
                                            const std::uint32_t (&b)[4]) {
  mma_bf16(c0, a, b[0], b[1]);
  mma_bf16(c1, a, b[2], b[3]);
}

// acc[16 x D] += a x Y[r0 .. r0+15][0 .. D): a one k-step A fragment, Y a row-major tile read transposed through
// t (b_kn_address lanes), each fragment against two n-blocks of 8 columns.
template <int D>
__device__ __forceinline__ void mma_rows_kn(float (&acc)[D / 8][4], const std::uint32_t (&a)[4], const LaneTile<D>& t,
                                            int r0) {
#pragma unroll
  for (int dp = 0; dp < D / 16; ++dp) {
    std::uint32_t b[4];
    ldmatrix_x4_trans(b, t.at(r0, 2 * dp));
    mma_bf16_x2(acc[2 * dp], acc[2 * dp + 1], a, b);
  }
}

// The A operand of k-step kk from accumulators c[n-block][4] over the same 16 rows (n-blocks 2kk, 2kk+1).
__device__ __forceinline__ void pack_a(std::uint32_t (&a)[4], const float (&c0)[4], const float (&c1)[4]) {
  a[0] = pack_bf16(c0[0], c0[1]);  // row g,   cols 2t, 2t+1
  a[1] = pack_bf16(c0[2], c0[3]);  // row g+8
  a[2] = pack_bf16(c1[0], c1[1]);  // row g,   cols 8+2t, 8+2t+1
  a[3] = pack_bf16(c1[2], c1[3]);  // row g+8
}

// Starts copying `valid` rows (the rest zero-filled) of kRows rows x D bf16 into a swizzled tile.
//   src: the first row; rows are row_stride elements apart. Every thread of the block takes part.
template <int D, int kThreads, int kRows = kMmaRows>
__device__ __forceinline__ void load_tile_async(bf16* tile, const bf16* src, std::int64_t row_stride, int valid) {
  constexpr int kChunks = D / 8;
  for (int c = threadIdx.x; c < kRows * kChunks; c += kThreads) {
    const int r = c / kChunks, ch = c % kChunks;
    const bool ok = r < valid;
    cp_async_16(tile + swz(D, r, ch), ok ? src + r * row_stride + ch * 8 : src, ok ? 16 : 0);
  }
}

// The backward kernels' shared memory (mma1 and mma2 alike), kMmaRows keys and query rows per tile:
//   k, v [64][D]; q, dout [2 stages][64][D]; ds^T [64 keys][64 queries]; lse, Di (f32), query positions (i64) [2][64]
template <int D>
struct BackwardSmem {
  static constexpr int kRows = kMmaRows;
  static constexpr int bytes() { return (6 * kRows * D + kRows * kRows) * 2 + 2 * kRows * (4 + 4 + 8); }
  bf16 *k, *v, *q, *dout, *ds;
  float *lse, *di;
  std::int64_t* qpos;
  __device__ __forceinline__ explicit BackwardSmem(unsigned char* base)
      : k(reinterpret_cast<bf16*>(base)),
        v(k + kRows * D),
        q(v + kRows * D),
        dout(q + 2 * kRows * D),
        ds(dout + 2 * kRows * D),
        lse(reinterpret_cast<float*>(ds + kRows * kRows)),
        di(lse + 2 * kRows),
        qpos(reinterpret_cast<std::int64_t*>(di + 2 * kRows)) {}

  // Starts copying query tile i0.. of head h, batch b (q, dout, lse, Di, positions) into `stage`; rows past the end
  // are zero-filled. Every thread of the block takes part.
  template <int kThreads>
  __device__ __forceinline__ void load_query_tile(const AttentionArgs& a, int stage, int b, int h, int i0) const {
    const int sq = a.q.ns, valid = min(kRows, sq - i0);
    load_tile_async<D, kThreads>(q + stage * kRows * D, at<const bf16>(a.q, b, i0, h), a.q.row_stride, valid);
    load_tile_async<D, kThreads>(dout + stage * kRows * D, at<const bf16>(a.dout, b, i0, h), a.dout.row_stride, valid);
    const int i = threadIdx.x;
    if (i < kRows) {
      const bool ok = i < valid;
      const float* l = at<const float>(a.lse, b, i0, h) + (ok ? i * a.lse.row_stride : 0);
      const float* d = a.di + (static_cast<std::int64_t>(b) * a.q.nh + h) * sq + i0 + (ok ? i : 0);
      cp_async_4(lse + stage * kRows + i, l, ok ? 4 : 0);
      cp_async_4(di + stage * kRows + i, d, ok ? 4 : 0);
      cp_async_8(qpos + stage * kRows + i, a.q_pos + i0 + (ok ? i : 0), ok ? 8 : 0);
    }
  }
};

// The launch every tensor-core kernel shares: opt in to `bytes` of dynamic shared memory, then launch on `grid`
// with `threads` per block. for_head_dim runs f.template operator()<D>() for the call's head dim, 64 or 128.
template <class Kernel>
cudaError_t launch_mma(Kernel* kernel, dim3 grid, int threads, int bytes, const AttentionArgs& a, cudaStream_t s) {
  const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e != cudaSuccess) return e;
  kernel<<<grid, threads, bytes, s>>>(a);
  return cudaGetLastError();
}
template <class F>
cudaError_t for_head_dim(int d, F&& f) {
  switch (d) {
    case 64:
      return f.template operator()<64>();
    case 128:
      return f.template operator()<128>();
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace cpsim::cuda
