// Where each lane of a warp points ldmatrix, for every operand the tensor-core kernels load, and the shared-memory
// swizzle. Plain functions of the lane (host and device), so that tests/gpu/host/fragments_test.cpp can replay the
// kernels' fragment traffic against the PTX ISA's description of ldmatrix and mma.sync without a GPU.
//
// ldmatrix.x4: lanes 8i..8i+7 give the addresses of the 8 rows of matrix i; lane l receives, of matrix i, row l/4,
// columns 2(l%4) and 2(l%4)+1 (with .trans: rows 2(l%4), 2(l%4)+1 of column l/4) in register i.
// mma.m16n8k16 (g = l/4, t = l%4): A regs {(g, 2t..), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..)}; B regs
// {(k = 2t.., n = g), (k = 2t+8.., n = g)}; C {(g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)}.
#pragma once

#if defined(__CUDACC__)
#define CPSIM_HD __host__ __device__ __forceinline__
#else
#define CPSIM_HD inline
#endif

namespace cpsim::cuda {

struct RowChunk {
  int row, chunk;  // a tile row and a 16-byte chunk (8 bf16 values) of it
};

// Element (row, 8 * chunk) of a tile with W values per row, chunks swizzled: chunk c of row r is stored at chunk
// c ^ (r % 8), so the 8 rows one ldmatrix phase reads at one chunk column fall in 8 different bank groups.
CPSIM_HD constexpr int swz(int W, int row, int chunk) {
  return row * W + ((chunk ^ (row & 7)) << 3);
}

// A = X[r0..r0+15][16kk..16kk+15] of a row-major tile X: matrices (rows 0-7 | 8-15) x (cols 0-7 | 8-15), in the
// order a0a1, a2a3, a4a5, a6a7.
CPSIM_HD constexpr RowChunk a_address(int lane, int r0, int kk) {
  return {r0 + (lane & 15), 2 * kk + (lane >> 4)};
}

// B[k][n] = Y[n0 + n][k] (S = X Y^T), k-steps 2kp and 2kp+1: the four 8-wide chunks of rows n0..n0+7.
CPSIM_HD constexpr RowChunk b_nk_address(int lane, int n0, int kp) {
  return {n0 + (lane & 7), 4 * kp + (lane >> 3)};
}

// B[k][n] = Y[n0 + n][16kk + k] (S = X Y^T), one k-step for two n-blocks: {b[0], b[1]} = rows n0..n0+7,
// {b[2], b[3]} = rows n0+8..n0+15 (the mma2 kernels: one fragment then serves more rows of X).
CPSIM_HD constexpr RowChunk b_nk16_address(int lane, int n0, int kk) {
  return {n0 + (lane & 7) + ((lane >> 4) << 3), 2 * kk + ((lane >> 3) & 1)};
}

// B[k][n] = Y[16kk + k][16dp + n] (O = P Y), read transposed: (rows 0-7 | 8-15) x (cols 0-7), then x (cols 8-15).
CPSIM_HD constexpr RowChunk b_kn_address(int lane, int kk, int dp) {
  return {16 * kk + (lane & 7) + ((lane >> 3) & 1) * 8, 2 * dp + (lane >> 4)};
}

// A[m][k] = T[16kk + k][16w + m] of a tile T stored transposed (the backward's ds^T: rows are keys, columns
// queries; A is ds for the queries 16w.. of warp w), read with .trans.
CPSIM_HD constexpr RowChunk at_address(int lane, int w, int kk) {
  return {16 * kk + (lane & 7) + (lane >> 4) * 8, 2 * w + ((lane >> 3) & 1)};
}

// The byte offset of a lane's address, split into what depends on the lane alone and what depends on the loop alone
// (the mma2 kernels compute the lane's part once, then one xor and an immediate offset per ldmatrix). Every address
// function above is (r0 + row(lane), c0 + chunk(lane)) with r0 a multiple of 8, so that row & 7 is the lane's alone,
// and c0 a multiple of 2 (or 4) with no bit in common with chunk(lane). Then chunk ^ (row & 7) = c0 ^ (chunk(lane) ^
// (row(lane) & 7)), and since the chunk bits (4 .. 4 + log2(W/8)) of a row's byte offset 2 W row are zero:
//   2 swz(W, r0 + row(lane), c0 + chunk(lane)) = 2 W r0 + (lane_bytes ^ (c0 << 4)),  lane_bytes = 2 swz(W, row(lane),
//   chunk(lane)) = the address function at r0 = c0 = 0.
CPSIM_HD constexpr unsigned lane_bytes(int W, RowChunk at_origin) {
  return 2u * static_cast<unsigned>(swz(W, at_origin.row, at_origin.chunk));
}
CPSIM_HD constexpr unsigned tile_bytes(int W, int r0, int c0, unsigned lane) {
  return 2u * static_cast<unsigned>(W * r0) + (lane ^ (static_cast<unsigned>(c0) << 4));
}

}  // namespace cpsim::cuda
