// Replays the tensor-core kernels' fragment traffic on the host (no GPU needed): shared-memory tiles in the kernels'
// swizzled layout, ldmatrix and mma.sync m16n8k16 emulated as the PTX ISA describes them, and the kernels' own
// address functions (sim/cuda/kernels/fragments.hpp) and loop structure. Each product must equal the plain matrix
// product. Small integer values keep every sum exact.
#include "sim/cuda/kernels/fragments.hpp"

#include <doctest/doctest.h>

#include <array>
#include <vector>

using namespace cpsim::cuda;

namespace {

using Regs = std::array<std::array<std::array<float, 2>, 4>, 32>;  // [lane][register][half]
using Acc = std::array<std::array<float, 4>, 32>;                  // [lane][c0..c3]

// A tile of `rows` x W values stored as the kernels store it.
struct Tile {
  int W, rows;
  std::vector<float> mem;
  Tile(int w, int r) : W(w), rows(r), mem(static_cast<std::size_t>(w * r)) {}
  float& at(int r, int c) { return mem[static_cast<std::size_t>(swz(W, r, c / 8) + c % 8)]; }
};

Tile make_tile(int W, int rows, int salt) {
  Tile t(W, rows);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < W; ++c) t.at(r, c) = static_cast<float>((r * 7 + c * 3 + salt) % 5 - 2);
  return t;
}

// ldmatrix.x4: lanes 8i..8i+7 address the rows of matrix i; lane l gets row l/4, cols 2(l%4).. (trans: rows
// 2(l%4).., col l/4) of matrix i in register i. `offset(lane)`: the element the lane points at.
template <class Offset>
Regs ldmatrix_at(const Tile& t, Offset offset, bool trans) {
  std::array<std::array<int, 8>, 4> row_at{};
  for (int lane = 0; lane < 32; ++lane) row_at[lane / 8][lane % 8] = offset(lane);
  Regs out{};
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 2; ++j) {
        const int at = trans ? row_at[i][2 * (lane % 4) + j] + lane / 4 : row_at[i][lane / 4] + 2 * (lane % 4) + j;
        out[lane][i][j] = t.mem[static_cast<std::size_t>(at)];
      }
  return out;
}

// The mma1 kernels' addressing: the lane's (row, chunk), swizzled.
template <class Addr>
Regs ldmatrix(const Tile& t, Addr addr, bool trans) {
  return ldmatrix_at(
      t,
      [&](int l) {
        const RowChunk rc = addr(l);
        return swz(t.W, rc.row, rc.chunk);
      },
      trans);
}

// The mma2 kernels' addressing (LaneTile): the lane's byte offset at the origin, then tile_bytes per fragment.
template <class Origin>
Regs ldmatrix_lanes(const Tile& t, Origin origin, int r0, int c0, bool trans) {
  return ldmatrix_at(
      t, [&](int l) { return static_cast<int>(tile_bytes(t.W, r0, c0, lane_bytes(t.W, origin(l))) / 2); }, trans);
}

// mma.m16n8k16: c += a b with the ISA's fragment layouts (g = lane / 4, t = lane % 4).
void mma(Acc& c, const Regs& a, const Regs& b, int b_first) {
  float A[16][16] = {}, B[16][8] = {};
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int j = 0; j < 2; ++j) {
      A[g][2 * t + j] = a[lane][0][j];
      A[g + 8][2 * t + j] = a[lane][1][j];
      A[g][2 * t + 8 + j] = a[lane][2][j];
      A[g + 8][2 * t + 8 + j] = a[lane][3][j];
      B[2 * t + j][g] = b[lane][b_first][j];
      B[2 * t + 8 + j][g] = b[lane][b_first + 1][j];
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int e = 0; e < 4; ++e) {
      const int row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
      for (int k = 0; k < 16; ++k) c[lane][e] += A[row][k] * B[k][col];
    }
  }
}

// pack_a: the accumulators of n-blocks 2kk, 2kk+1 as the A operand of k-step kk.
Regs pack_a(const Acc& c0, const Acc& c1) {
  Regs a{};
  for (int lane = 0; lane < 32; ++lane) {
    a[lane][0] = {c0[lane][0], c0[lane][1]};
    a[lane][1] = {c0[lane][2], c0[lane][3]};
    a[lane][2] = {c1[lane][0], c1[lane][1]};
    a[lane][3] = {c1[lane][2], c1[lane][3]};
  }
  return a;
}

// Element (row, col) of a [16 x 8 nb] result held as accumulators acc[nb].
float held(const std::vector<Acc>& acc, int row, int col) {
  const int nb = col / 8, c = col % 8;
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int e = 0; e < 4; ++e)
      if (g + 8 * (e >> 1) == row && 2 * t + (e & 1) == c) return acc[static_cast<std::size_t>(nb)][lane][e];
  }
  return -1e30f;
}

}  // namespace

TEST_CASE("the forward's s = q k^T and o = p v fragments reproduce the matrix products, D = 64 and 128") {
  for (int D : {64, 128}) {
    INFO("D = " << D);
    Tile q = make_tile(D, 64, 1), k = make_tile(D, 64, 2), v = make_tile(D, 64, 3);
    for (int warp = 0; warp < 4; ++warp) {
      // 1. s = q k^T for the warp's 16 rows, as the kernel loops: q fragments per k-step, k two k-steps at a time.
      std::vector<Regs> qf;
      for (int kk = 0; kk < D / 16; ++kk)
        qf.push_back(ldmatrix(
            q, [&](int l) { return a_address(l, 16 * warp, kk); }, false));
      std::vector<Acc> s(8, Acc{});
      for (int kp = 0; kp < D / 32; ++kp)
        for (int nb = 0; nb < 8; ++nb) {
          const Regs bk = ldmatrix(
              k, [&](int l) { return b_nk_address(l, nb * 8, kp); }, false);
          mma(s[static_cast<std::size_t>(nb)], qf[static_cast<std::size_t>(2 * kp)], bk, 0);
          mma(s[static_cast<std::size_t>(nb)], qf[static_cast<std::size_t>(2 * kp + 1)], bk, 2);
        }
      int wrong = 0;
      for (int r = 0; r < 16; ++r)
        for (int j = 0; j < 64; ++j) {
          float want = 0;
          for (int d = 0; d < D; ++d) want += q.at(16 * warp + r, d) * k.at(j, d);
          wrong += held(s, r, j) != want;
        }
      CHECK(wrong == 0);
      // 2. o = s v: s packed as A operands, v read transposed.
      std::vector<Acc> o(static_cast<std::size_t>(D / 8), Acc{});
      for (int kk = 0; kk < 4; ++kk) {
        const Regs pa = pack_a(s[static_cast<std::size_t>(2 * kk)], s[static_cast<std::size_t>(2 * kk + 1)]);
        for (int dp = 0; dp < D / 16; ++dp) {
          const Regs bv = ldmatrix(
              v, [&](int l) { return b_kn_address(l, kk, dp); }, true);
          mma(o[static_cast<std::size_t>(2 * dp)], pa, bv, 0);
          mma(o[static_cast<std::size_t>(2 * dp + 1)], pa, bv, 2);
        }
      }
      wrong = 0;
      for (int r = 0; r < 16; ++r)
        for (int d = 0; d < D; ++d) {
          float want = 0;
          for (int j = 0; j < 64; ++j) want += held(s, r, j) * v.at(j, d);
          wrong += held(o, r, d) != want;
        }
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("the backward's ds^T tile, written from accumulators and read transposed, gives dq = ds k") {
  const int D = 128;
  Tile k = make_tile(D, 64, 4);
  // ds^T [64 keys][64 queries]: warp w's accumulators hold keys 16w.., as the kernel writes them to shared memory.
  Tile dst(64, 64);
  auto ds_t = [](int key, int query) { return static_cast<float>((key * 5 + query * 11) % 7 - 3); };
  for (int w = 0; w < 4; ++w)
    for (int nb = 0; nb < 8; ++nb)
      for (int lane = 0; lane < 32; ++lane)
        for (int r = 0; r < 2; ++r) {
          const int key = 16 * w + lane / 4 + 8 * r, query = nb * 8 + 2 * (lane % 4);
          const int at = swz(64, key, nb) + 2 * (lane % 4);  // the kernel's store of one packed pair
          dst.mem[static_cast<std::size_t>(at)] = ds_t(key, query);
          dst.mem[static_cast<std::size_t>(at + 1)] = ds_t(key, query + 1);
        }
  for (int warp = 0; warp < 4; ++warp) {
    std::vector<Acc> dq(static_cast<std::size_t>(D / 8), Acc{});
    for (int half = 0; half < D / 64; ++half)
      for (int kk = 0; kk < 4; ++kk) {
        const Regs da = ldmatrix(
            dst, [&](int l) { return at_address(l, warp, kk); }, true);
        for (int dp = 0; dp < 4; ++dp) {
          const Regs bk = ldmatrix(
              k, [&](int l) { return b_kn_address(l, kk, 4 * half + dp); }, true);
          mma(dq[static_cast<std::size_t>(8 * half + 2 * dp)], da, bk, 0);
          mma(dq[static_cast<std::size_t>(8 * half + 2 * dp + 1)], da, bk, 2);
        }
      }
    int wrong = 0;
    for (int r = 0; r < 16; ++r)
      for (int d = 0; d < D; ++d) {
        float want = 0;
        for (int key = 0; key < 64; ++key) want += ds_t(key, 16 * warp + r) * k.at(key, d);
        wrong += held(dq, r, d) != want;
      }
    CHECK(wrong == 0);
  }
}

TEST_CASE("the backward's transposed products: s^T = k q^T, dv = p^T dout, dk = ds^T q") {
  const int D = 64;
  Tile kt = make_tile(D, 64, 5), qt = make_tile(D, 64, 6);
  for (int warp = 0; warp < 4; ++warp) {
    // s^T = k q^T: A = the warp's key rows, B = q rows (the n index).
    std::vector<Acc> st(8, Acc{});
    for (int kp = 0; kp < D / 32; ++kp) {
      const Regs ka0 = ldmatrix(
          kt, [&](int l) { return a_address(l, 16 * warp, 2 * kp); }, false);
      const Regs ka1 = ldmatrix(
          kt, [&](int l) { return a_address(l, 16 * warp, 2 * kp + 1); }, false);
      for (int nb = 0; nb < 8; ++nb) {
        const Regs bq = ldmatrix(
            qt, [&](int l) { return b_nk_address(l, nb * 8, kp); }, false);
        mma(st[static_cast<std::size_t>(nb)], ka0, bq, 0);
        mma(st[static_cast<std::size_t>(nb)], ka1, bq, 2);
      }
    }
    // dk = s^T q (standing in for ds^T q): s^T packed as A (k = queries), q read transposed (k = query rows).
    std::vector<Acc> dk(static_cast<std::size_t>(D / 8), Acc{});
    for (int kk = 0; kk < 4; ++kk) {
      const Regs a = pack_a(st[static_cast<std::size_t>(2 * kk)], st[static_cast<std::size_t>(2 * kk + 1)]);
      for (int dp = 0; dp < D / 16; ++dp) {
        const Regs bq = ldmatrix(
            qt, [&](int l) { return b_kn_address(l, kk, dp); }, true);
        mma(dk[static_cast<std::size_t>(2 * dp)], a, bq, 0);
        mma(dk[static_cast<std::size_t>(2 * dp + 1)], a, bq, 2);
      }
    }
    int wrong = 0;
    for (int r = 0; r < 16; ++r) {
      for (int i = 0; i < 64; ++i) {
        float want = 0;
        for (int d = 0; d < D; ++d) want += kt.at(16 * warp + r, d) * qt.at(i, d);
        wrong += held(st, r, i) != want;
      }
      for (int d = 0; d < D; ++d) {
        float want = 0;
        for (int i = 0; i < 64; ++i) want += held(st, r, i) * qt.at(i, d);
        wrong += held(dk, r, d) != want;
      }
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("the swizzle is a permutation of each row's chunks, and one ldmatrix phase hits 8 bank groups") {
  for (int W : {64, 128}) {
    for (int r = 0; r < 64; ++r) {
      std::vector<int> seen(static_cast<std::size_t>(W / 8), 0);
      for (int c = 0; c < W / 8; ++c) ++seen[static_cast<std::size_t>((swz(W, r, c) - r * W) / 8)];
      for (int n : seen) CHECK(n == 1);
    }
    // 8 consecutive rows at one logical chunk: 16-byte bank groups (offset / 8 values) mod 8 all differ.
    for (int r0 = 0; r0 < 64; r0 += 8)
      for (int c = 0; c < W / 8; ++c) {
        std::vector<int> group(8, 0);
        for (int r = r0; r < r0 + 8; ++r) ++group[static_cast<std::size_t>(swz(W, r, c) / 8 % 8)];
        for (int n : group) CHECK(n == 1);
      }
  }
}

// The mma2 kernels (attention_mma2_fwd.cu, attention_mma2_bwd.cu): the same instructions, addressed through
// LaneTile (one byte offset per lane, then tile_bytes per fragment), on their shapes.

TEST_CASE("every lane address splits into the lane's part and the loop's part, as the mma2 kernels compute it") {
  for (int W : {64, 128}) {
    INFO("W = " << W);
    int wrong = 0, checked = 0;
    auto same = [&](RowChunk origin, RowChunk at, int r0, int c0) {
      wrong += tile_bytes(W, r0, c0, lane_bytes(W, origin)) != 2u * static_cast<unsigned>(swz(W, at.row, at.chunk));
      ++checked;
    };
    for (int lane = 0; lane < 32; ++lane)
      for (int r0 = 0; r0 < 2 * 64; r0 += 16)  // up to 128 rows: mma2's q tile, and the backward's two stages
        for (int c = 0; 2 * c < W / 8; ++c) {
          same(a_address(lane, 0, 0), a_address(lane, r0, c), r0, 2 * c);
          same(b_nk16_address(lane, 0, 0), b_nk16_address(lane, r0, c), r0, 2 * c);
          same(b_kn_address(lane, 0, 0), b_kn_address(lane, r0 / 16, c), r0, 2 * c);
          if (2 * c < 64 / 8 && r0 < 64) same(at_address(lane, 0, 0), at_address(lane, c, r0 / 16), r0, 2 * c);
          if (4 * c < W / 8) same(b_nk_address(lane, 0, 0), b_nk_address(lane, r0, c), r0, 4 * c);
        }
    CHECK(checked > 0);
    CHECK(wrong == 0);
  }
}

TEST_CASE("the mma2 forward's 32 rows per warp: each k and v fragment serves both m-tiles, D = 64 and 128") {
  for (int D : {64, 128}) {
    INFO("D = " << D);
    Tile q = make_tile(D, 128, 1), k = make_tile(D, 64, 2), v = make_tile(D, 64, 3);
    for (int warp = 0; warp < 4; ++warp) {
      const int w0 = 32 * warp;
      // s = q k^T, as the kernel loops: per k-step, both m-tiles' q fragments, then 4 k fragments of 16 keys.
      std::vector<std::vector<Acc>> s(2, std::vector<Acc>(8, Acc{}));
      for (int kk = 0; kk < D / 16; ++kk) {
        Regs qf[2];
        for (int mt = 0; mt < 2; ++mt)
          qf[mt] = ldmatrix_lanes(
              q, [](int l) { return a_address(l, 0, 0); }, w0 + 16 * mt, 2 * kk, false);
        for (int np = 0; np < 4; ++np) {
          const Regs bk = ldmatrix_lanes(
              k, [](int l) { return b_nk16_address(l, 0, 0); }, 16 * np, 2 * kk, false);
          for (int mt = 0; mt < 2; ++mt) {
            mma(s[mt][static_cast<std::size_t>(2 * np)], qf[mt], bk, 0);
            mma(s[mt][static_cast<std::size_t>(2 * np + 1)], qf[mt], bk, 2);
          }
        }
      }
      int wrong = 0;
      for (int mt = 0; mt < 2; ++mt)
        for (int r = 0; r < 16; ++r)
          for (int j = 0; j < 64; ++j) {
            float want = 0;
            for (int d = 0; d < D; ++d) want += q.at(w0 + 16 * mt + r, d) * k.at(j, d);
            wrong += held(s[mt], r, j) != want;
          }
      CHECK(wrong == 0);
      // o = s v: per k-step of 16 keys, one v fragment (read transposed) for both m-tiles.
      std::vector<std::vector<Acc>> o(2, std::vector<Acc>(static_cast<std::size_t>(D / 8), Acc{}));
      for (int kk = 0; kk < 4; ++kk) {
        Regs pa[2];
        for (int mt = 0; mt < 2; ++mt)
          pa[mt] = pack_a(s[mt][static_cast<std::size_t>(2 * kk)], s[mt][static_cast<std::size_t>(2 * kk + 1)]);
        for (int dp = 0; dp < D / 16; ++dp) {
          const Regs bv = ldmatrix_lanes(
              v, [](int l) { return b_kn_address(l, 0, 0); }, 16 * kk, 2 * dp, true);
          for (int mt = 0; mt < 2; ++mt) {
            mma(o[mt][static_cast<std::size_t>(2 * dp)], pa[mt], bv, 0);
            mma(o[mt][static_cast<std::size_t>(2 * dp + 1)], pa[mt], bv, 2);
          }
        }
      }
      wrong = 0;
      for (int mt = 0; mt < 2; ++mt)
        for (int r = 0; r < 16; ++r)
          for (int d = 0; d < D; ++d) {
            float want = 0;
            for (int j = 0; j < 64; ++j) want += held(s[mt], r, j) * v.at(j, d);
            wrong += held(o[mt], r, d) != want;
          }
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE(
    "the mma2 backward's slices: held k, v fragments, s^T, dv, dp^T, dk per 16 queries, then dq by float2 pairs") {
  for (int D : {64, 128}) {
    INFO("D = " << D);
    // k, v: the block's 64 keys. q, dout: two stages of 64 query rows; the replay works on stage 1 (rows 64..127),
    // so the stage offset of the kernel's addresses is replayed too.
    Tile k = make_tile(D, 64, 7), v = make_tile(D, 64, 8), q = make_tile(D, 128, 9), dout = make_tile(D, 128, 10);
    constexpr int kStage = 64;
    Tile ds_t(64, 64);  // ds^T [64 keys][64 queries], as step 7 stores it; s^T stands in for ds^T (the indexing)
    std::vector<float> st_all(64 * 64);  // s^T [key][query], from the held accumulators
    int wrong = 0;
    for (int warp = 0; warp < 4; ++warp) {
      std::vector<Regs> kf, vf;  // held for the whole block
      for (int kk = 0; kk < D / 16; ++kk) {
        kf.push_back(ldmatrix_lanes(
            k, [](int l) { return a_address(l, 0, 0); }, 16 * warp, 2 * kk, false));
        vf.push_back(ldmatrix_lanes(
            v, [](int l) { return a_address(l, 0, 0); }, 16 * warp, 2 * kk, false));
      }
      std::vector<Acc> dv(static_cast<std::size_t>(D / 8), Acc{}), dk(static_cast<std::size_t>(D / 8), Acc{});
      for (int np = 0; np < 4; ++np) {
        const int q0 = kStage + 16 * np;
        std::vector<Acc> st(2, Acc{}), dpt(2, Acc{});
        for (int kk = 0; kk < D / 16; ++kk) {  // 1. s^T = k q^T
          const Regs bq = ldmatrix_lanes(
              q, [](int l) { return b_nk16_address(l, 0, 0); }, q0, 2 * kk, false);
          mma(st[0], kf[static_cast<std::size_t>(kk)], bq, 0);
          mma(st[1], kf[static_cast<std::size_t>(kk)], bq, 2);
        }
        const Regs pa = pack_a(st[0], st[1]);
        for (int dp = 0; dp < D / 16; ++dp) {  // 3. dv += p^T dout
          const Regs bd = ldmatrix_lanes(
              dout, [](int l) { return b_kn_address(l, 0, 0); }, q0, 2 * dp, true);
          mma(dv[static_cast<std::size_t>(2 * dp)], pa, bd, 0);
          mma(dv[static_cast<std::size_t>(2 * dp + 1)], pa, bd, 2);
        }
        for (int kk = 0; kk < D / 16; ++kk) {  // 4. dp^T = v dout^T
          const Regs bd = ldmatrix_lanes(
              dout, [](int l) { return b_nk16_address(l, 0, 0); }, q0, 2 * kk, false);
          mma(dpt[0], vf[static_cast<std::size_t>(kk)], bd, 0);
          mma(dpt[1], vf[static_cast<std::size_t>(kk)], bd, 2);
        }
        for (int dp = 0; dp < D / 16; ++dp) {  // 6. dk += ds^T q
          const Regs bq = ldmatrix_lanes(
              q, [](int l) { return b_kn_address(l, 0, 0); }, q0, 2 * dp, true);
          mma(dk[static_cast<std::size_t>(2 * dp)], pa, bq, 0);
          mma(dk[static_cast<std::size_t>(2 * dp + 1)], pa, bq, 2);
        }
        for (int r = 0; r < 16; ++r)
          for (int c = 0; c < 16; ++c) {
            float want_s = 0, want_dp = 0;
            for (int d = 0; d < D; ++d) {
              want_s += k.at(16 * warp + r, d) * q.at(q0 + c, d);
              want_dp += v.at(16 * warp + r, d) * dout.at(q0 + c, d);
            }
            wrong += held(st, r, c) != want_s;
            wrong += held(dpt, r, c) != want_dp;
            st_all[static_cast<std::size_t>((16 * warp + r) * 64 + 16 * np + c)] = held(st, r, c);
          }
        // 7. the packed pairs into ds^T, as the kernel stores them: key row g (+8), n-block 2np + nb, column 2t.
        for (int lane = 0; lane < 32; ++lane)
          for (int nb = 0; nb < 2; ++nb)
            for (int r = 0; r < 2; ++r) {
              const int key = 16 * warp + lane / 4 + 8 * r;
              const auto at = static_cast<std::size_t>(swz(64, key, 2 * np + nb) + 2 * (lane % 4));
              ds_t.mem[at] = st[static_cast<std::size_t>(nb)][lane][2 * r];
              ds_t.mem[at + 1] = st[static_cast<std::size_t>(nb)][lane][2 * r + 1];
            }
      }
      for (int r = 0; r < 16; ++r)
        for (int d = 0; d < D; ++d) {
          float want_v = 0, want_k = 0;
          for (int i = 0; i < 64; ++i) {
            const float sti = st_all[static_cast<std::size_t>((16 * warp + r) * 64 + i)];
            want_v += sti * dout.at(kStage + i, d);
            want_k += sti * q.at(kStage + i, d);
          }
          wrong += held(dv, r, d) != want_v;
          wrong += held(dk, r, d) != want_k;
        }
    }
    CHECK(wrong == 0);
    // 8. dq = ds k: warp w's 16 queries, ds read transposed from ds^T once, then per 16 columns two n-blocks, written
    //    out as the kernel's float2 atomics write them: (row g (+8), columns 16 dp + 8 nb + 2t, +1).
    std::vector<float> dq(static_cast<std::size_t>(64 * D), 0.f);
    std::vector<int> writes(static_cast<std::size_t>(64 * D), 0);
    for (int warp = 0; warp < 4; ++warp) {
      std::vector<Regs> dsa;
      for (int kk = 0; kk < 4; ++kk)
        dsa.push_back(ldmatrix_lanes(
            ds_t, [](int l) { return at_address(l, 0, 0); }, 16 * kk, 2 * warp, true));
      for (int dp = 0; dp < D / 16; ++dp) {
        std::vector<Acc> acc(2, Acc{});
        for (int kk = 0; kk < 4; ++kk) {
          const Regs bk = ldmatrix_lanes(
              k, [](int l) { return b_kn_address(l, 0, 0); }, 16 * kk, 2 * dp, true);
          mma(acc[0], dsa[static_cast<std::size_t>(kk)], bk, 0);
          mma(acc[1], dsa[static_cast<std::size_t>(kk)], bk, 2);
        }
        for (int lane = 0; lane < 32; ++lane)
          for (int r = 0; r < 2; ++r)
            for (int nb = 0; nb < 2; ++nb)
              for (int c = 0; c < 2; ++c) {
                const int row = 16 * warp + lane / 4 + 8 * r, col = 16 * dp + 8 * nb + 2 * (lane % 4) + c;
                dq[static_cast<std::size_t>(row * D + col)] += acc[static_cast<std::size_t>(nb)][lane][2 * r + c];
                ++writes[static_cast<std::size_t>(row * D + col)];
              }
      }
    }
    int wrong_dq = 0, not_once = 0;
    for (int i = 0; i < 64; ++i)
      for (int d = 0; d < D; ++d) {
        float want = 0;
        for (int key = 0; key < 64; ++key) want += st_all[static_cast<std::size_t>(key * 64 + i)] * k.at(key, d);
        wrong_dq += dq[static_cast<std::size_t>(i * D + d)] != want;
        not_once += writes[static_cast<std::size_t>(i * D + d)] != 1;
      }
    CHECK(wrong_dq == 0);
    CHECK(not_once == 0);
  }
}
