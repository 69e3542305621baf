// Tensor-core attention backward, bf16 in, f32 gradients ADDED into dq, dk, dv.
//
// One block of 4 warps per (KV head g, batch b, tile of 64 keys); warp w owns keys 16w..16w+15 and accumulates
// their dK, dV in registers over every query head of the group and every query tile that sees the keys (a suffix:
// the queries at or after the tile's first key). Query tiles of 64 rows (q, dout, lse, Di, positions) are
// double-buffered with cp.async. Per query tile, with everything transposed so that keys are the mma rows:
//   1. s^T  = k q^T                                            [16 keys x 64 queries] per warp
//   2. p^T  = exp(scale s^T - lse) where visible, else 0       (lse = -inf: the row sees no key, p = 0)
//   3. dv  += p^T dout
//   4. dp^T = v dout^T
//   5. ds^T = scale p^T (dp^T - Di),  Di = rowsum(dout * out) (precomputed per query row)
//   6. dk  += ds^T q
//   7. ds^T -> shared memory (bf16); 8. dq += ds k for the warp's 16 queries, added to global dq atomically
// (dq gathers from every key tile's block; dk, dv of these keys belong to this block alone).
#include "sim/cuda/kernels/mma_tiles.cuh"

namespace cpsim::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kBr = kMmaRows, kBc = kMmaRows;
static_assert(kBr == BackwardSmem<64>::kRows && kBc == BackwardSmem<64>::kRows, "the tiles BackwardSmem holds");

template <int D>
__global__ void __launch_bounds__(kThreads, 2) backward_mma(AttentionArgs a) {
  extern __shared__ __align__(16) unsigned char smem[];
  const BackwardSmem<D> sm(smem);  // mma_tiles.cuh
  bf16 *s_k = sm.k, *s_v = sm.v, *s_q = sm.q, *s_do = sm.dout, *s_ds = sm.ds;
  float *s_lse = sm.lse, *s_di = sm.di;
  std::int64_t* s_qpos = sm.qpos;

  const int kvh = blockIdx.x, b = blockIdx.y, kt = blockIdx.z;
  const int sq = a.q.ns, sk = a.k.ns;
  const int j0 = kt * kBc, keys = min(kBc, sk - j0);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, tq = lane & 3;

  // Queries that see any of these keys: [i_start, sq) (positions ascending).
  const int i_start = a.causal ? lower_bound_pos(a.q_pos, sq, a.k_pos[j0]) : 0;
  const int qt0 = i_start / kBr, n_qt = (sq + kBr - 1) / kBr, per_head = n_qt - qt0;
  const int steps = per_head > 0 ? a.group * per_head : 0;
  if (steps == 0) return;  // no query sees these keys: nothing to add
  const std::int64_t k_last = a.k_pos[j0 + keys - 1];

  const int key_row[2] = {16 * warp + gr, 16 * warp + gr + 8};
  std::int64_t kpos[2];
  for (int r = 0; r < 2; ++r) kpos[r] = key_row[r] < keys ? a.k_pos[j0 + key_row[r]] : kPosNone;

  auto load_step = [&](int step, int stage) {
    sm.template load_query_tile<kThreads>(a, stage, b, kvh * a.group + step / per_head, (qt0 + step % per_head) * kBr);
  };

  const bf16* k = at<const bf16>(a.k, b, j0, kvh);
  const bf16* v = at<const bf16>(a.v, b, j0, kvh);
  load_tile_async<D, kThreads>(s_k, k, a.k.row_stride, keys);
  load_tile_async<D, kThreads>(s_v, v, a.v.row_stride, keys);
  load_step(0, 0);
  cp_async_commit();

  const float sl2 = a.scale * kLog2e;
  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int dn = 0; dn < D / 8; ++dn)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[dn][e] = dv[dn][e] = 0.f;

  for (int step = 0; step < steps; ++step) {
    const int stage = step & 1;
    if (step + 1 < steps) load_step(step + 1, stage ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const int h = kvh * a.group + step / per_head, i0 = (qt0 + step % per_head) * kBr, rows = min(kBr, sq - i0);
    const bf16* tq_ = s_q + stage * kBr * D;
    const bf16* tdo = s_do + stage * kBr * D;
    const float* lse = s_lse + stage * kBr;
    const float* di = s_di + stage * kBr;
    const std::int64_t* qpos = s_qpos + stage * kBr;

    // 1. s^T = k q^T
    float s[kBr / 8][4];
#pragma unroll
    for (int nb = 0; nb < kBr / 8; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nb][e] = 0.f;
#pragma unroll
    for (int kp = 0; kp < D / 32; ++kp) {
      std::uint32_t ka0[4], ka1[4];
      load_a<D>(ka0, s_k, 16 * warp, 2 * kp);
      load_a<D>(ka1, s_k, 16 * warp, 2 * kp + 1);
#pragma unroll
      for (int nb = 0; nb < kBr / 8; ++nb) {
        std::uint32_t bq[4];
        load_b_nk<D>(bq, tq_, nb * 8, kp);
        mma_bf16(s[nb], ka0, bq[0], bq[1]);
        mma_bf16(s[nb], ka1, bq[2], bq[3]);
      }
    }

    // 2. p^T = exp(scale s - lse), 0 where masked or where the query sees no key at all (lse = -inf).
    const bool whole = keys == kBc && rows == kBr && (!a.causal || k_last <= qpos[0]);
#pragma unroll
    for (int nb = 0; nb < kBr / 8; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int qc = nb * 8 + 2 * tq + (e & 1);
        const float lse_q = lse[qc];
        bool visible = lse_q != neg_inf();
        if (!whole) visible = visible && key_row[e >> 1] < keys && qc < rows && (!a.causal || kpos[e >> 1] <= qpos[qc]);
        s[nb][e] = visible ? exp2f(s[nb][e] * sl2 - lse_q * kLog2e) : 0.f;
      }

      // 3. dv += p^T dout
#pragma unroll
    for (int kk = 0; kk < kBr / 16; ++kk) {
      std::uint32_t pa[4];
      pack_a(pa, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        std::uint32_t bd[4];
        load_b_kn<D>(bd, tdo, kk, dp);
        mma_bf16(dv[2 * dp], pa, bd[0], bd[1]);
        mma_bf16(dv[2 * dp + 1], pa, bd[2], bd[3]);
      }
    }

    // 4. dp^T = v dout^T
    float dpt[kBr / 8][4];
#pragma unroll
    for (int nb = 0; nb < kBr / 8; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) dpt[nb][e] = 0.f;
#pragma unroll
    for (int kp = 0; kp < D / 32; ++kp) {
      std::uint32_t va0[4], va1[4];
      load_a<D>(va0, s_v, 16 * warp, 2 * kp);
      load_a<D>(va1, s_v, 16 * warp, 2 * kp + 1);
#pragma unroll
      for (int nb = 0; nb < kBr / 8; ++nb) {
        std::uint32_t bd[4];
        load_b_nk<D>(bd, tdo, nb * 8, kp);
        mma_bf16(dpt[nb], va0, bd[0], bd[1]);
        mma_bf16(dpt[nb], va1, bd[2], bd[3]);
      }
    }

    // 5. ds^T = scale p^T (dp^T - Di), kept in s.
#pragma unroll
    for (int nb = 0; nb < kBr / 8; ++nb)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nb][e] = s[nb][e] * (dpt[nb][e] - di[nb * 8 + 2 * tq + (e & 1)]) * a.scale;

        // 6. dk += ds^T q, and 7. ds^T to shared memory for the dq product.
#pragma unroll
    for (int kk = 0; kk < kBr / 16; ++kk) {
      std::uint32_t da[4];
      pack_a(da, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        std::uint32_t bq[4];
        load_b_kn<D>(bq, tq_, kk, dp);
        mma_bf16(dk[2 * dp], da, bq[0], bq[1]);
        mma_bf16(dk[2 * dp + 1], da, bq[2], bq[3]);
      }
    }
#pragma unroll
    for (int nb = 0; nb < kBr / 8; ++nb)
#pragma unroll
      for (int r = 0; r < 2; ++r)
        *reinterpret_cast<std::uint32_t*>(s_ds + swz(kBr, key_row[r], nb) + 2 * tq) =
            pack_bf16(s[nb][2 * r], s[nb][2 * r + 1]);
    __syncthreads();

    // 8. dq[16 queries of this warp] += ds k, 64 head-dim columns at a time. ds = (ds^T)^T: read transposed.
    float* dq = at<float>(a.dq, b, i0, h);
#pragma unroll
    for (int half = 0; half < D / 64; ++half) {
      float acc[8][4];
#pragma unroll
      for (int dn = 0; dn < 8; ++dn)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[dn][e] = 0.f;
#pragma unroll
      for (int kk = 0; kk < kBc / 16; ++kk) {
        std::uint32_t da[4];
        load_a_transposed<kBr>(da, s_ds, warp, kk);
#pragma unroll
        for (int dp = 0; dp < 4; ++dp) {
          std::uint32_t bk[4];
          load_b_kn<D>(bk, s_k, kk, 4 * half + dp);
          mma_bf16(acc[2 * dp], da, bk[0], bk[1]);
          mma_bf16(acc[2 * dp + 1], da, bk[2], bk[3]);
        }
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int qr = 16 * warp + gr + 8 * r;
        if (qr >= rows) continue;
        float* row = dq + qr * a.dq.row_stride + half * 64 + 2 * tq;
#pragma unroll
        for (int dn = 0; dn < 8; ++dn) {
          atomicAdd(row + dn * 8, acc[dn][2 * r]);
          atomicAdd(row + dn * 8 + 1, acc[dn][2 * r + 1]);
        }
      }
    }
    __syncthreads();  // every warp is done with this stage and with ds^T before they are refilled
  }

  // dk, dv of the block's keys: add into the f32 views.
  float* dk_out = at<float>(a.dk, b, j0, kvh);
  float* dv_out = at<float>(a.dv, b, j0, kvh);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (key_row[r] >= keys) continue;
    float* krow = dk_out + key_row[r] * a.dk.row_stride + 2 * tq;
    float* vrow = dv_out + key_row[r] * a.dv.row_stride + 2 * tq;
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
      float2* pk = reinterpret_cast<float2*>(krow + dn * 8);
      float2* pv = reinterpret_cast<float2*>(vrow + dn * 8);
      const float2 ok = *pk, ov = *pv;
      *pk = make_float2(ok.x + dk[dn][2 * r], ok.y + dk[dn][2 * r + 1]);
      *pv = make_float2(ov.x + dv[dn][2 * r], ov.y + dv[dn][2 * r + 1]);
    }
  }
}

}  // namespace

cudaError_t launch_backward_mma(const AttentionArgs& a, cudaStream_t stream) {
  return for_head_dim(a.q.d, [&]<int D>() {
    const dim3 grid(a.k.nh, a.k.nb, (a.k.ns + kBc - 1) / kBc);
    return launch_mma(backward_mma<D>, grid, kThreads, BackwardSmem<D>::bytes(), a, stream);
  });
}

}  // namespace cpsim::cuda
