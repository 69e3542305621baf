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

}  // namespace cpsim::cuda
