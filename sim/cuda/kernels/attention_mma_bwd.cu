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

template <int D>
constexpr int backward_smem_bytes() {
  // k, v; q, dout x 2 stages; ds^T; lse, Di (f32) and positions (i64) x 2 stages
  return (2 * kBc * D + 4 * kBr * D + kBc * kBr) * 2 + 2 * kBr * (4 + 4 + 8);
}

template <int D>
__global__ void __launch_bounds__(kThreads, 2) backward_mma(AttentionArgs a) {
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* s_k = reinterpret_cast<bf16*>(smem);
  bf16* s_v = s_k + kBc * D;
  bf16* s_q = s_v + kBc * D;                                               // [2][kBr][D]
  bf16* s_do = s_q + 2 * kBr * D;                                          // [2][kBr][D]
  bf16* s_ds = s_do + 2 * kBr * D;                                         // [kBc][kBr]: ds^T, swizzled rows of 64
  float* s_lse = reinterpret_cast<float*>(s_ds + kBc * kBr);               // [2][kBr]
  float* s_di = s_lse + 2 * kBr;                                           // [2][kBr]
  std::int64_t* s_qpos = reinterpret_cast<std::int64_t*>(s_di + 2 * kBr);  // [2][kBr]

  const int kvh = blockIdx.x, b = blockIdx.y, kt = blockIdx.z;
  const int sq = a.q.ns, sk = a.k.ns, nq_heads = a.q.nh;
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
    const int h = kvh * a.group + step / per_head, i0 = (qt0 + step % per_head) * kBr, valid = min(kBr, sq - i0);
    load_tile_async<D, kThreads>(s_q + stage * kBr * D, at<const bf16>(a.q, b, i0, h), a.q.row_stride, valid);
    load_tile_async<D, kThreads>(s_do + stage * kBr * D, at<const bf16>(a.dout, b, i0, h), a.dout.row_stride, valid);
    const int i = threadIdx.x;
    if (i < kBr) {
      const bool ok = i < valid;
      const float* lse = at<const float>(a.lse, b, i0, h) + (ok ? i * a.lse.row_stride : 0);
      const float* di = a.di + (static_cast<std::int64_t>(b) * nq_heads + h) * sq + i0 + (ok ? i : 0);
      cp_async_4(s_lse + stage * kBr + i, lse, ok ? 4 : 0);
      cp_async_4(s_di + stage * kBr + i, di, ok ? 4 : 0);
      cp_async_8(s_qpos + stage * kBr + i, a.q_pos + i0 + (ok ? i : 0), ok ? 8 : 0);
    }
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

template <int D>
cudaError_t launch(const AttentionArgs& a, cudaStream_t stream) {
  constexpr int bytes = backward_smem_bytes<D>();
  const cudaError_t e = cudaFuncSetAttribute(backward_mma<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e != cudaSuccess) return e;
  const dim3 grid(a.k.nh, a.k.nb, (a.k.ns + kBc - 1) / kBc);
  backward_mma<D><<<grid, kThreads, bytes, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_backward_mma(const AttentionArgs& a, cudaStream_t stream) {
  switch (a.q.d) {
    case 64:
      return launch<64>(a, stream);
    case 128:
      return launch<128>(a, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace cpsim::cuda
