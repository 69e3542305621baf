// Tensor-core attention forward (flash-attention's online softmax), bf16 in, f32 accumulate, f32 LSE.
//
// One block of 4 warps per (query head h, batch b, tile of 64 query rows); warp w owns rows 16w..16w+15.
// Keys come in tiles of 64, double-buffered with cp.async; with ascending positions the keys a block sees are a
// prefix [0, n_keys) (n_keys = keys at or before its last query), so wholly masked key tiles are never loaded.
// Per key tile, in units where p = exp(scale (s - m)) = 2^(s scale log2e - m scale log2e):
//   1. s = q k^T                                  (q fragments stay in registers for the whole block)
//   2. s = -inf where the key is masked (after the last key, or later than the row's position)
//   3. m' = max(m, rowmax s);  alpha = exp(scale (m - m'));  p = exp(scale (s - m'))
//      l = alpha l + rowsum p;  o = alpha o       (0 while the row has seen nothing: m = -inf)
//   4. o += p v                                   (p packed to bf16 as the A operand, v read transposed)
// At the end: out = o / l, lse = scale m + log l; a row that saw no key: out 0, lse -inf.
#include "sim/cuda/kernels/mma_tiles.cuh"

namespace cpsim::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kBr = kMmaRows, kBc = kMmaRows;

template <int D>
constexpr int forward_smem_bytes() {
  return (kBr * D + 4 * kBc * D) * 2 + 2 * kBc * 8;  // q; k, v x 2 stages; key positions x 2 stages
}

template <int D>
__global__ void __launch_bounds__(kThreads, 2) forward_mma(AttentionArgs a) {
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* s_q = reinterpret_cast<bf16*>(smem);
  bf16* s_k = s_q + kBr * D;                                                  // [2][kBc][D]
  bf16* s_v = s_k + 2 * kBc * D;                                              // [2][kBc][D]
  std::int64_t* s_kpos = reinterpret_cast<std::int64_t*>(s_v + 2 * kBc * D);  // [2][kBc]

  const int h = blockIdx.x, b = blockIdx.y;
  const int qt = gridDim.z - 1 - blockIdx.z;  // the latest (longest) query tiles start first
  const int kvh = h / a.group;
  const int sq = a.q.ns, sk = a.k.ns;
  const int i0 = qt * kBr, rows = min(kBr, sq - i0);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, tq = lane & 3;

  const bf16* q = at<const bf16>(a.q, b, i0, h);
  const bf16* k = at<const bf16>(a.k, b, 0, kvh);
  const bf16* v = at<const bf16>(a.v, b, 0, kvh);
  const std::int64_t q_first = a.q_pos[i0], q_last = a.q_pos[i0 + rows - 1];
  const int n_keys = a.causal ? upper_bound_pos(a.k_pos, sk, q_last) : sk;
  const int n_tiles = (n_keys + kBc - 1) / kBc;

  // This thread's two rows (g and g+8 of the warp's 16) and their positions.
  const int row[2] = {16 * warp + gr, 16 * warp + gr + 8};
  std::int64_t pos[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) pos[r] = row[r] < rows ? a.q_pos[i0 + row[r]] : INT64_MIN;

  const float sl2 = a.scale * kLog2e;
  float o[D / 8][4];
#pragma unroll
  for (int dn = 0; dn < D / 8; ++dn)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[dn][e] = 0.f;
  float m[2] = {neg_inf(), neg_inf()}, l[2] = {0.f, 0.f};
  std::uint32_t qf[D / 16][4];

  auto load_kv = [&](int kt, int stage) {
    const int j0 = kt * kBc, valid = min(kBc, sk - j0);
    load_tile_async<D, kThreads>(s_k + stage * kBc * D, k + j0 * a.k.row_stride, a.k.row_stride, valid);
    load_tile_async<D, kThreads>(s_v + stage * kBc * D, v + j0 * a.v.row_stride, a.v.row_stride, valid);
    if (threadIdx.x < kBc)
      s_kpos[stage * kBc + threadIdx.x] = threadIdx.x < valid ? a.k_pos[j0 + threadIdx.x] : kPosNone;
  };

  if (n_tiles > 0) {
    load_tile_async<D, kThreads>(s_q, q, a.q.row_stride, rows);
    load_kv(0, 0);
    cp_async_commit();
  }
  for (int kt = 0; kt < n_tiles; ++kt) {
    const int stage = kt & 1;
    if (kt + 1 < n_tiles) load_kv(kt + 1, stage ^ 1);
    cp_async_commit();
    cp_async_wait<1>();  // everything but the tile just started: q and tile kt are in shared memory
    __syncthreads();
    if (kt == 0)
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) load_a<D>(qf[kk], s_q, 16 * warp, kk);
    const bf16* tk = s_k + stage * kBc * D;
    const bf16* tv = s_v + stage * kBc * D;
    const std::int64_t* kp = s_kpos + stage * kBc;

    // 1. s = q k^T: [16 rows, 64 keys] per warp, as 8 n-blocks of 8 keys.
    float s[kBc / 8][4];
#pragma unroll
    for (int nb = 0; nb < kBc / 8; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nb][e] = 0.f;
#pragma unroll
    for (int kp2 = 0; kp2 < D / 32; ++kp2)
#pragma unroll
      for (int nb = 0; nb < kBc / 8; ++nb) {
        std::uint32_t bk[4];
        load_b_nk<D>(bk, tk, nb * 8, kp2);
        mma_bf16(s[nb], qf[2 * kp2], bk[0], bk[1]);
        mma_bf16(s[nb], qf[2 * kp2 + 1], bk[2], bk[3]);
      }

    // 2. Mask, unless every key of the tile exists and is at or before the block's first query.
    const int j0 = kt * kBc;
    const bool whole = j0 + kBc <= sk && (!a.causal || kp[kBc - 1] <= q_first);
    if (!whole)
#pragma unroll
      for (int nb = 0; nb < kBc / 8; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int jj = nb * 8 + 2 * tq + (e & 1);
          const bool visible = j0 + jj < sk && (!a.causal || kp[jj] <= pos[e >> 1]);
          if (!visible) s[nb][e] = neg_inf();
        }

        // 3. Online softmax, per row r: the row's four lanes (same g) reduce with xor 1 and 2.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = neg_inf();
#pragma unroll
      for (int nb = 0; nb < kBc / 8; ++nb) mx = fmaxf(mx, fmaxf(s[nb][2 * r], s[nb][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m[r], mx);
      const float base = m_new == neg_inf() ? 0.f : m_new * sl2;  // nothing seen yet: every p is exp(-inf) = 0
      const float alpha = exp2f(m[r] * sl2 - base);
      m[r] = m_new;
      l[r] *= alpha;
#pragma unroll
      for (int dn = 0; dn < D / 8; ++dn) {
        o[dn][2 * r] *= alpha;
        o[dn][2 * r + 1] *= alpha;
      }
#pragma unroll
      for (int nb = 0; nb < kBc / 8; ++nb) {
        s[nb][2 * r] = exp2f(s[nb][2 * r] * sl2 - base);
        s[nb][2 * r + 1] = exp2f(s[nb][2 * r + 1] * sl2 - base);
        l[r] += s[nb][2 * r] + s[nb][2 * r + 1];  // this lane's part; the row's lanes are summed at the end
      }
    }

    // 4. o += p v: k-steps of 16 keys, n-blocks of 8 head-dim values.
#pragma unroll
    for (int kk = 0; kk < kBc / 16; ++kk) {
      std::uint32_t pa[4];
      pack_a(pa, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        std::uint32_t bv[4];
        load_b_kn<D>(bv, tv, kk, dp);
        mma_bf16(o[2 * dp], pa, bv[0], bv[1]);
        mma_bf16(o[2 * dp + 1], pa, bv[2], bv[3]);
      }
    }
    __syncthreads();  // every warp is done with this stage before the next iteration refills it
  }

  // 5. out = o / l, lse = scale m + log l (natural log).
  bf16* out = at<bf16>(a.out, b, i0, h);
  float* lse = at<float>(a.lse, b, i0, h);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    if (row[r] >= rows) continue;
    const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;
    bf16* o_row = out + row[r] * a.out.row_stride;
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn)
      *reinterpret_cast<std::uint32_t*>(o_row + dn * 8 + 2 * tq) =
          pack_bf16(o[dn][2 * r] * inv, o[dn][2 * r + 1] * inv);
    if (tq == 0) lse[row[r] * a.lse.row_stride] = l[r] > 0.f ? m[r] * a.scale + logf(l[r]) : neg_inf();
  }
}

}  // namespace

cudaError_t launch_forward_mma(const AttentionArgs& a, cudaStream_t stream) {
  return for_head_dim(a.q.d, [&]<int D>() {
    const dim3 grid(a.q.nh, a.q.nb, (a.q.ns + kBr - 1) / kBr);
    return launch_mma(forward_mma<D>, grid, kThreads, forward_smem_bytes<D>(), a, stream);
  });
}

}  // namespace cpsim::cuda
