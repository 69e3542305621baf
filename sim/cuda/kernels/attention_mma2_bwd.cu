// Tensor-core attention backward, second version (--kernel mma2): the products of attention_mma_bwd.cu (mma1), with
//   - one block per (query head, batch, tile of 64 keys), so that the query heads of a group run in parallel instead
//     of one block looping over all of them. Each block's dK, dV belong to its query head alone: with GQA they are
//     stored (not added) into a per-query-head scratch [B, Sk, Nq, D] and a second kernel adds the group's sum into
//     dk, dv, so no two blocks ever write the same element (FlashAttention-2 sums expanded per-head dK, dV over the
//     group the same way: mha_bwd in csrc/flash_attn/flash_api.cpp);
//   - the warp's K and V fragments loaded into registers once per block and kept across the query tiles (mma1 reads
//     them again at every tile). The registers also hold dK and dV (2 D/4 per thread), so each query tile is worked
//     in slices of 16 queries, one at a time, and only one slice's s^T and dp^T are live. On sm_80 at head dim 128
//     that is still too much beside both and V is read again per slice (holding it there spills);
//   - dq added with float2 atomics on sm_90 (atomicAdd(float2*, float2)), half the atomic operations of mma1;
//   - lanes addressing shared memory through LaneTile (an xor and an immediate per ldmatrix) and the causal mask found
//     per key row by one binary search over the tile's query positions (no position per element), as in the mma2
//     forward. Together these keep head dim 128 within 255 registers without spilling.
// Per query tile (warp w owns keys 16w..16w+15; everything transposed so that keys are the mma rows), per slice of
// 16 queries:
//   1. s^T  = k q^T                                            [16 keys x 16 queries] per warp
//   2. p^T  = exp(scale s^T - lse) where visible, else 0       (lse = -inf: the row sees no key, p = 0)
//   3. dv  += p^T dout                                         (the slice is one k-step of the sum over queries)
//   4. dp^T = v dout^T
//   5. ds^T = scale p^T (dp^T - Di),  Di = rowsum(dout * out) (precomputed per query row)
//   6. dk  += ds^T q
//   7. ds^T -> shared memory (bf16)
// then 8. dq += ds k for the warp's 16 queries of the tile, added to global dq atomically.
// Fragment traffic per warp and 64 x 64 tile at head dim D, for 5 D/2 mma: D/4 ldmatrix.x4 in each of steps 1, 3, 4,
// 6 and 8, plus 4 for ds in step 8 (plus D/4 in step 4 where V is not held). D = 128: 164 for 320 mma, 0.51 per mma
// (mma1: 184, 0.58; sm_80: 196); D = 64: 84 for 160 (mma1: 92).
#include "sim/cuda/kernels/mma_tiles.cuh"

namespace cpsim::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kBr = kMmaRows, kBc = kMmaRows;
static_assert(kBr == BackwardSmem<64>::kRows && kBc == BackwardSmem<64>::kRows, "the tiles BackwardSmem holds");

// dst[0..1] += (x, y): one vector atomic on sm_90, two scalar ones before.
__device__ __forceinline__ void atomic_add2(float* dst, float x, float y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(dst), make_float2(x, y));
#else
  atomicAdd(dst, x);
  atomicAdd(dst + 1, y);
#endif
}

template <int D>
__global__ void __launch_bounds__(kThreads, 2) backward_mma2(AttentionArgs a) {
  extern __shared__ __align__(16) unsigned char smem[];
  const BackwardSmem<D> sm(smem);  // mma_tiles.cuh: k, v; q, dout, lse, Di, positions x 2 stages; ds^T
  bf16 *s_k = sm.k, *s_v = sm.v, *s_q = sm.q, *s_do = sm.dout, *s_ds = sm.ds;

  const int h = blockIdx.x, b = blockIdx.y, kt = blockIdx.z;
  const int kvh = h / a.group;
  const int sq = a.q.ns, sk = a.k.ns;
  const int j0 = kt * kBc, keys = min(kBc, sk - j0);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, tq = lane & 3;

  // Queries that see any of these keys: [i_start, sq) (positions ascending).
  const int i_start = a.causal ? lower_bound_pos(a.q_pos, sq, a.k_pos[j0]) : 0;
  const int qt0 = i_start / kBr, n_qt = (sq + kBr - 1) / kBr;
  const int steps = max(n_qt - qt0, 0);
  if (steps == 0 && a.group == 1) return;  // no query sees these keys: nothing to add (GQA: zeros to store, below)
  const std::int64_t k_last = a.k_pos[j0 + keys - 1];

  // This thread's key rows: g and g+8 of the warp's 16.
  const int key_row[2] = {16 * warp + gr, 16 * warp + gr + 8};

  // Where this lane points ldmatrix (fragments.hpp): q, dout as B of s^T = k q^T and dp^T = v dout^T (queries
  // 16 np.., k-step kk); dout, q as B of dv = p^T dout and dk = ds^T q (queries 16 kk.., columns 16 dp..), k as B of
  // dq = ds k (keys 16 kk.., columns 16 dp..); ds^T read transposed. (k, v as A: below.)
  const LaneTile<D> k_kn(s_k, b_kn_address(lane, 0, 0));
  const LaneTile<D> q_nk(s_q, b_nk16_address(lane, 0, 0)), do_nk(s_do, b_nk16_address(lane, 0, 0));
  const LaneTile<D> q_kn(s_q, b_kn_address(lane, 0, 0)), do_kn(s_do, b_kn_address(lane, 0, 0));
  const LaneTile<kBr> ds_t(s_ds, at_address(lane, 0, 0));
  const LaneTile<D> v_a2(s_v, a_address(lane, 0, 0));  // where V is not held

  auto load_step = [&](int step, int stage) {
    sm.template load_query_tile<kThreads>(a, stage, b, h, (qt0 + step) * kBr);
  };

  const float sl2 = a.scale * kLog2e;
  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int dn = 0; dn < D / 8; ++dn)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[dn][e] = dv[dn][e] = 0.f;

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  constexpr bool kHoldV = D <= 64;
#else
  constexpr bool kHoldV = true;
#endif
  // K and V first, in a group of their own; their fragments go into registers while the first query tile comes in.
  // (kHoldV false, sm_80 at head dim 128: V stays in shared memory and is read per slice, see the header.)
  std::uint32_t kf[D / 16][4], vf[kHoldV ? D / 16 : 1][4];  // the warp's 16 keys of K and V as A operands, every k-step
  if (steps > 0) {
    load_tile_async<D, kThreads>(s_k, at<const bf16>(a.k, b, j0, kvh), a.k.row_stride, keys);
    load_tile_async<D, kThreads>(s_v, at<const bf16>(a.v, b, j0, kvh), a.v.row_stride, keys);
    cp_async_commit();
    load_step(0, 0);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const LaneTile<D> k_a(s_k, a_address(lane, 0, 0)), v_a(s_v, a_address(lane, 0, 0));
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      ldmatrix_x4(kf[kk], k_a.at(16 * warp, 2 * kk));
      if constexpr (kHoldV) ldmatrix_x4(vf[kk], v_a.at(16 * warp, 2 * kk));
    }
  }

  for (int step = 0; step < steps; ++step) {
    const int stage = step & 1;
    if (step + 1 < steps) load_step(step + 1, stage ^ 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const int i0 = (qt0 + step) * kBr, rows = min(kBr, sq - i0);
    const int q_stage = stage * kBr;  // the stage's first row in s_q and s_do
    const float* lse = sm.lse + stage * kBr;
    const float* di = sm.di + stage * kBr;
    const std::int64_t* qpos = sm.qpos + stage * kBr;

    // Steps 1-7 for one slice of 16 queries at a time (not unrolled), so that only that slice's s^T and dp^T are
    // live (8 registers each instead of 32): what lets K and V stay in registers at head dim 128.
    const bool whole = keys == kBc && rows == kBr && (!a.causal || k_last <= qpos[0]);
    int first[2] = {0, 0}, last[2] = {kBr, kBr};  // key row r sees the tile's queries [first, last)
    if (!whole)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const bool key = key_row[r] < keys;
        first[r] = a.causal && key ? lower_bound_pos(qpos, rows, a.k_pos[j0 + key_row[r]]) : 0;  // a suffix
        last[r] = key ? rows : 0;
      }
#pragma unroll 1
    for (int np = 0; np < kBr / 16; ++np) {
      const int q0 = q_stage + 16 * np;  // the slice's first row in s_q and s_do
      // 1. s^T = k q^T: [16 keys x 16 queries], n-blocks of 8 queries.
      float st[2][4] = {}, dpt[2][4] = {};
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        std::uint32_t bq[4];
        ldmatrix_x4(bq, q_nk.at(q0, 2 * kk));
        mma_bf16_x2(st[0], st[1], kf[kk], bq);
      }
      // 2. p^T = exp(scale s - lse), 0 where masked or where the query sees no key (lse = -inf, taken as +inf).
#pragma unroll
      for (int nb = 0; nb < 2; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int qc = 16 * np + 8 * nb + 2 * tq + (e & 1);
          const float lse_q = lse[qc] == neg_inf() ? pos_inf() : lse[qc];
          const bool visible = qc >= first[e >> 1] && qc < last[e >> 1];
          st[nb][e] = visible ? exp2f(st[nb][e] * sl2 - lse_q * kLog2e) : 0.f;
        }
      // 3. dv += p^T dout: the slice is one k-step of the product over queries.
      std::uint32_t pa[4];
      pack_a(pa, st[0], st[1]);
      mma_rows_kn<D>(dv, pa, do_kn, q0);
      // 4. dp^T = v dout^T
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        std::uint32_t bd[4], va[4];
        if constexpr (kHoldV) {
#pragma unroll
          for (int e = 0; e < 4; ++e) va[e] = vf[kk][e];
        } else {
          ldmatrix_x4(va, v_a2.at(16 * warp, 2 * kk));
        }
        ldmatrix_x4(bd, do_nk.at(q0, 2 * kk));
        mma_bf16_x2(dpt[0], dpt[1], va, bd);
      }
      // 5. ds^T = scale p^T (dp^T - Di), kept in st.
#pragma unroll
      for (int nb = 0; nb < 2; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) st[nb][e] *= (dpt[nb][e] - di[16 * np + 8 * nb + 2 * tq + (e & 1)]) * a.scale;
      // 6. dk += ds^T q
      std::uint32_t da[4];
      pack_a(da, st[0], st[1]);
      mma_rows_kn<D>(dk, da, q_kn, q0);
      // 7. ds^T to shared memory (the slice's two n-blocks of the [64 keys][64 queries] tile), for the dq product.
#pragma unroll
      for (int nb = 0; nb < 2; ++nb)
#pragma unroll
        for (int r = 0; r < 2; ++r)
          *reinterpret_cast<std::uint32_t*>(s_ds + swz(kBr, key_row[r], 2 * np + nb) + 2 * tq) =
              pack_bf16(st[nb][2 * r], st[nb][2 * r + 1]);
    }
    __syncthreads();

    // 8. dq[16 queries of this warp] += ds k, 16 head-dim columns at a time: ds = (ds^T)^T, read transposed once
    //    (all 64 keys: 4 k-steps), then each k fragment feeds two mma and the pair of n-blocks goes out atomically.
    float* dq = at<float>(a.dq, b, i0, h);
    std::uint32_t dsa[kBc / 16][4];
#pragma unroll
    for (int kk = 0; kk < kBc / 16; ++kk) ldmatrix_x4_trans(dsa[kk], ds_t.at(16 * kk, 2 * warp));
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      float acc[2][4] = {};
#pragma unroll
      for (int kk = 0; kk < kBc / 16; ++kk) {
        std::uint32_t bk[4];
        ldmatrix_x4_trans(bk, k_kn.at(16 * kk, 2 * dp));
        mma_bf16_x2(acc[0], acc[1], dsa[kk], bk);
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int qr = 16 * warp + gr + 8 * r;
        if (qr >= rows) continue;
        float* row = dq + qr * a.dq.row_stride + 16 * dp + 2 * tq;
        atomic_add2(row, acc[0][2 * r], acc[0][2 * r + 1]);
        atomic_add2(row + 8, acc[1][2 * r], acc[1][2 * r + 1]);
      }
    }
    __syncthreads();  // every warp is done with this stage and with ds^T before they are refilled
  }

  // dk, dv of the block's keys. Without GQA the block owns them: added into the f32 views. With GQA: stored into
  // the query head's slice of the scratch, [B, Sk, Nq, D], which the group sum (below) adds into dk, dv.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (key_row[r] >= keys) continue;
    const int j = j0 + key_row[r];
    float* krow = a.group == 1 ? at<float>(a.dk, b, j, kvh) : a.dk_part + ((std::int64_t(b) * sk + j) * a.q.nh + h) * D;
    float* vrow = a.group == 1 ? at<float>(a.dv, b, j, kvh) : a.dv_part + ((std::int64_t(b) * sk + j) * a.q.nh + h) * D;
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
      float2* pk = reinterpret_cast<float2*>(krow + dn * 8 + 2 * tq);
      float2* pv = reinterpret_cast<float2*>(vrow + dn * 8 + 2 * tq);
      float2 ok = make_float2(0.f, 0.f), ov = ok;
      if (a.group == 1) {
        ok = *pk;
        ov = *pv;
      }
      *pk = make_float2(ok.x + dk[dn][2 * r], ok.y + dk[dn][2 * r + 1]);
      *pv = make_float2(ov.x + dv[dn][2 * r], ov.y + dv[dn][2 * r + 1]);
    }
  }
}

// dk[b, j, g] += sum over the group's query heads h = g G .. g G + G-1 of part[b, j, h] (and the same for dv): one
// thread per 4 values of one (b, j, g), the G slices read in order, so the sum does not depend on timing.
template <int D>
__global__ void add_group_sums(AttentionArgs a) {
  const int j = blockIdx.x, b = blockIdx.y, sk = a.k.ns, nkv = a.k.nh, G = a.group;
  for (int t = threadIdx.x; t < nkv * D / 4; t += blockDim.x) {
    const int g = t / (D / 4), x = 4 * (t % (D / 4));
    const std::int64_t part = ((std::int64_t(b) * sk + j) * a.q.nh + std::int64_t(g) * G) * D + x;
    float4 sk4 = make_float4(0.f, 0.f, 0.f, 0.f), sv4 = sk4;
    for (int i = 0; i < G; ++i) {
      const float4 pk = *reinterpret_cast<const float4*>(a.dk_part + part + i * D);
      const float4 pv = *reinterpret_cast<const float4*>(a.dv_part + part + i * D);
      sk4 = make_float4(sk4.x + pk.x, sk4.y + pk.y, sk4.z + pk.z, sk4.w + pk.w);
      sv4 = make_float4(sv4.x + pv.x, sv4.y + pv.y, sv4.z + pv.z, sv4.w + pv.w);
    }
    float* dk = at<float>(a.dk, b, j, g) + x;
    float* dv = at<float>(a.dv, b, j, g) + x;
    dk[0] += sk4.x, dk[1] += sk4.y, dk[2] += sk4.z, dk[3] += sk4.w;
    dv[0] += sv4.x, dv[1] += sv4.y, dv[2] += sv4.z, dv[3] += sv4.w;
  }
}

}  // namespace

cudaError_t launch_backward_mma2(const AttentionArgs& a, cudaStream_t stream) {
  if (a.group > 1 && (a.dk_part == nullptr || a.dv_part == nullptr)) return cudaErrorInvalidValue;
  return for_head_dim(a.q.d, [&]<int D>() {
    const dim3 grid(a.q.nh, a.q.nb, (a.k.ns + kBc - 1) / kBc);
    const cudaError_t e = launch_mma(backward_mma2<D>, grid, kThreads, BackwardSmem<D>::bytes(), a, stream);
    if (e != cudaSuccess || a.group == 1) return e;
    add_group_sums<D><<<dim3(a.k.ns, a.k.nb), 256, 0, stream>>>(a);  // then the GQA group sums
    return cudaGetLastError();
  });
}

}  // namespace cpsim::cuda
