// Tensor-core attention forward, second version (--kernel mma2): the online softmax of attention_mma_fwd.cu (mma1),
// with 128 query rows per block of 4 warps, so that each warp holds 32 rows (two 16-row m-tiles) and every K and V
// fragment it reads from shared memory feeds two mma instead of one. FlashAttention-2 runs head dim 128 with the same
// 128 x 64 tiles and 4 warps on A100 and H100 (csrc/flash_attn/src/flash_fwd_launch_template.h).
//
// Fragment traffic per warp and 128 x 64 tile (mma1's per 64 x 64 tile in brackets), D = head dim:
//   s = q k^T   D/16 x (2 q + 4 k) ldmatrix.x4,  D mma     [D/2 k, D/2 mma: q held in registers]
//   o += p v    4 x D/16 ldmatrix.x4.trans,       D mma     [the same loads, D/2 mma]
//   D = 128: 80 ldmatrix.x4 for 256 mma, 0.31 per mma (mma1: 64 for 128, 0.5 per mma)
// The q fragments are read from shared memory again at every key tile: holding 32 rows of them would take 64 more
// registers per thread at D = 128 (the accumulators o already take 128).
//
// K and V have one buffer each, and their loads overlap compute as in FlashAttention-2: V_j is fetched while
// s = q K_j^T and the softmax run, K_{j+1} while o += p V_j runs. Per key tile j:
//   1. wait for K_j; every warp is done with V_{j-1}: start loading V_j
//   2. s = q k^T  3. mask  4. online softmax (as mma1)
//   5. wait for V_j; every warp is done with K_j: start loading K_{j+1}
//   6. o += p v
// A warp whose 32 rows see no key of tile j (causal, the tile's first key after the warp's last row) skips 2-6
// but still takes part in the loads and barriers. Where a tile needs the mask, each row finds the prefix of the tile
// it sees with one binary search over the tile's key positions and masks by index (no position per element). Lanes
// address shared memory through LaneTile (mma_tiles.cuh): one xor and an immediate per ldmatrix, which is what keeps
// head dim 128 within 255 registers without spilling. At the end: out = o / l, lse = scale m + log l; a row that saw no
// key: out 0, lse -inf.
#include "sim/cuda/kernels/mma_tiles.cuh"

namespace cpsim::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kBr = 2 * kMmaRows, kBc = kMmaRows;  // 128 query rows per block, 64 keys per tile
constexpr int kMt = 2;                             // m-tiles of 16 rows per warp
static_assert(kBr == 4 * 16 * kMt, "4 warps of kMt m-tiles cover the block's rows");

template <int D>
constexpr int forward2_smem_bytes() {
  return (kBr * D + 2 * kBc * D) * 2 + kBc * 8;  // q; k; v; key positions
}

template <int D>
__global__ void __launch_bounds__(kThreads, 2) forward_mma2(AttentionArgs a) {
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* s_q = reinterpret_cast<bf16*>(smem);                              // [kBr][D]
  bf16* s_k = s_q + kBr * D;                                              // [kBc][D]
  bf16* s_v = s_k + kBc * D;                                              // [kBc][D]
  std::int64_t* s_kpos = reinterpret_cast<std::int64_t*>(s_v + kBc * D);  // [kBc]

  const int h = blockIdx.x, b = blockIdx.y;
  const int qt = gridDim.z - 1 - blockIdx.z;  // the latest (longest) query tiles start first
  const int kvh = h / a.group;
  const int sq = a.q.ns, sk = a.k.ns;
  const int i0 = qt * kBr, rows = min(kBr, sq - i0);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, tq = lane & 3;
  const int w0 = warp * 16 * kMt;  // the warp's first row in the tile

  const bf16* q = at<const bf16>(a.q, b, i0, h);
  const bf16* k = at<const bf16>(a.k, b, 0, kvh);
  const bf16* v = at<const bf16>(a.v, b, 0, kvh);
  const int n_keys = a.causal ? upper_bound_pos(a.k_pos, sk, a.q_pos[i0 + rows - 1]) : sk;
  const int n_tiles = (n_keys + kBc - 1) / kBc;

  // The warp's rows [w0, w0 + 32) within the block's `rows`: their first and last positions (the same in every lane).
  const bool warp_rows = w0 < rows;
  const std::int64_t warp_first = warp_rows ? a.q_pos[i0 + w0] : INT64_MAX;
  const std::int64_t warp_last = warp_rows ? a.q_pos[i0 + min(w0 + 16 * kMt, rows) - 1] : INT64_MIN;
  // The position of this thread's row in m-tile mt, half r: row w0 + 16 mt + gr + 8 r (INT64_MIN past the end).
  auto row_pos = [&](int mt, int r) {
    const int row = w0 + 16 * mt + gr + 8 * r;
    return row < rows ? a.q_pos[i0 + row] : INT64_MIN;
  };

  const float sl2 = a.scale * kLog2e;
  float o[kMt][D / 8][4], m[kMt][2], l[kMt][2];
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) {
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[mt][dn][e] = 0.f;
    m[mt][0] = m[mt][1] = neg_inf();
    l[mt][0] = l[mt][1] = 0.f;
  }

  // Where this lane points ldmatrix in each tile (fragments.hpp): q as A (rows w0 + 16 mt, k-step kk), k as B of
  // s = q k^T (keys 16 np .., k-step kk), v as B of o = p v (keys 16 kk .., head-dim columns 16 dp ..).
  const LaneTile<D> q_lanes(s_q, a_address(lane, 0, 0)), k_lanes(s_k, b_nk16_address(lane, 0, 0)),
      v_lanes(s_v, b_kn_address(lane, 0, 0));

  auto load_k = [&](int kt) {
    const int j0 = kt * kBc, valid = min(kBc, sk - j0);
    load_tile_async<D, kThreads>(s_k, k + j0 * a.k.row_stride, a.k.row_stride, valid);
    if (threadIdx.x < kBc) s_kpos[threadIdx.x] = threadIdx.x < valid ? a.k_pos[j0 + threadIdx.x] : kPosNone;
  };
  auto load_v = [&](int kt) {
    const int j0 = kt * kBc;
    load_tile_async<D, kThreads>(s_v, v + j0 * a.v.row_stride, a.v.row_stride, min(kBc, sk - j0));
  };

  if (n_tiles > 0) {
    load_tile_async<D, kThreads, kBr>(s_q, q, a.q.row_stride, rows);
    load_k(0);
    cp_async_commit();
  }
  for (int kt = 0; kt < n_tiles; ++kt) {
    // 1. K_kt (and q) are in shared memory, and every warp is done with V_{kt-1}: V_kt may come in.
    cp_async_wait<0>();
    __syncthreads();
    load_v(kt);
    cp_async_commit();
    const int j0 = kt * kBc;
    const bool active = warp_rows && (!a.causal || s_kpos[0] <= warp_last);  // the same in every lane of the warp
    float s[kMt][kBc / 8][4];
    if (active) {
      // 2. s = q k^T: [32 rows, 64 keys] per warp; each k fragment serves both m-tiles.
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
        for (int nb = 0; nb < kBc / 8; ++nb)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mt][nb][e] = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        std::uint32_t qf[kMt][4];
#pragma unroll
        for (int mt = 0; mt < kMt; ++mt) ldmatrix_x4(qf[mt], q_lanes.at(w0 + 16 * mt, 2 * kk));
#pragma unroll
        for (int np = 0; np < kBc / 16; ++np) {
          std::uint32_t bk[4];
          ldmatrix_x4(bk, k_lanes.at(16 * np, 2 * kk));
#pragma unroll
          for (int mt = 0; mt < kMt; ++mt) {
            mma_bf16_x2(s[mt][2 * np], s[mt][2 * np + 1], qf[mt], bk);
          }
        }
      }

      // 3. Mask, unless every key of the tile exists and is at or before the warp's first row. Row (mt, r) sees
      //    the tile's keys [0, lim): positions ascend, and a missing key has position kPosNone.
      const bool whole = j0 + kBc <= sk && (!a.causal || s_kpos[kBc - 1] <= warp_first);
      if (!whole)
#pragma unroll
        for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int lim = a.causal ? upper_bound_pos(s_kpos, kBc, row_pos(mt, r)) : min(kBc, sk - j0);
#pragma unroll
            for (int nb = 0; nb < kBc / 8; ++nb)
#pragma unroll
              for (int c = 0; c < 2; ++c)
                if (nb * 8 + 2 * tq + c >= lim) s[mt][nb][2 * r + c] = neg_inf();
          }

#pragma unroll
      for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          // 4. Online softmax per row (m-tile mt, half r); the row's four lanes (same g) reduce with xor 1 and 2.
          float mx = neg_inf();
#pragma unroll
          for (int nb = 0; nb < kBc / 8; ++nb) mx = fmaxf(mx, fmaxf(s[mt][nb][2 * r], s[mt][nb][2 * r + 1]));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          const float m_new = fmaxf(m[mt][r], mx);
          const float base = m_new == neg_inf() ? 0.f : m_new * sl2;  // nothing seen yet: every p is 0
          const float alpha = exp2f(m[mt][r] * sl2 - base);
          m[mt][r] = m_new;
          l[mt][r] *= alpha;
#pragma unroll
          for (int dn = 0; dn < D / 8; ++dn) {
            o[mt][dn][2 * r] *= alpha;
            o[mt][dn][2 * r + 1] *= alpha;
          }
#pragma unroll
          for (int nb = 0; nb < kBc / 8; ++nb) {
            s[mt][nb][2 * r] = exp2f(s[mt][nb][2 * r] * sl2 - base);
            s[mt][nb][2 * r + 1] = exp2f(s[mt][nb][2 * r + 1] * sl2 - base);
            l[mt][r] += s[mt][nb][2 * r] + s[mt][nb][2 * r + 1];  // this lane's part; summed over the row at the end
          }
        }
    }

    // 5. V_kt is in shared memory, and every warp is done with K_kt: K_{kt+1} may come in.
    cp_async_wait<0>();
    __syncthreads();
    if (kt + 1 < n_tiles) load_k(kt + 1);
    cp_async_commit();

    // 6. o += p v: k-steps of 16 keys, n-blocks of 8 head-dim values; each v fragment serves both m-tiles.
    if (active)
#pragma unroll
      for (int kk = 0; kk < kBc / 16; ++kk) {
        std::uint32_t pa[kMt][4];
#pragma unroll
        for (int mt = 0; mt < kMt; ++mt) pack_a(pa[mt], s[mt][2 * kk], s[mt][2 * kk + 1]);
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          std::uint32_t bv[4];
          ldmatrix_x4_trans(bv, v_lanes.at(16 * kk, 2 * dp));
#pragma unroll
          for (int mt = 0; mt < kMt; ++mt) {
            mma_bf16_x2(o[mt][2 * dp], o[mt][2 * dp + 1], pa[mt], bv);
          }
        }
      }
  }

  // 7. out = o / l, lse = scale m + log l (natural log).
  bf16* out = at<bf16>(a.out, b, i0, h);
  float* lse = at<float>(a.lse, b, i0, h);
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float sum = l[mt][r];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const int row = w0 + 16 * mt + gr + 8 * r;
      if (row >= rows) continue;
      const float inv = sum > 0.f ? 1.f / sum : 0.f;
      bf16* o_row = out + row * a.out.row_stride;
#pragma unroll
      for (int dn = 0; dn < D / 8; ++dn)
        *reinterpret_cast<std::uint32_t*>(o_row + dn * 8 + 2 * tq) =
            pack_bf16(o[mt][dn][2 * r] * inv, o[mt][dn][2 * r + 1] * inv);
      if (tq == 0) lse[row * a.lse.row_stride] = sum > 0.f ? m[mt][r] * a.scale + logf(sum) : neg_inf();
    }
}

}  // namespace

cudaError_t launch_forward_mma2(const AttentionArgs& a, cudaStream_t stream) {
  return for_head_dim(a.q.d, [&]<int D>() {
    const dim3 grid(a.q.nh, a.q.nb, (a.q.ns + kBr - 1) / kBr);
    return launch_mma(forward_mma2<D>, grid, kThreads, forward2_smem_bytes<D>(), a, stream);
  });
}

}  // namespace cpsim::cuda
