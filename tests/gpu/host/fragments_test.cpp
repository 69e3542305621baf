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
// 2(l%4).., col l/4) of matrix i in register i.
template <class Addr>
Regs ldmatrix(const Tile& t, Addr addr, bool trans) {
  std::array<std::array<int, 8>, 4> row_at{};
  for (int lane = 0; lane < 32; ++lane) {
    const RowChunk rc = addr(lane);
    row_at[lane / 8][lane % 8] = swz(t.W, rc.row, rc.chunk);
  }
  Regs out{};
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 2; ++j) {
        const int at = trans ? row_at[i][2 * (lane % 4) + j] + lane / 4 : row_at[i][lane / 4] + 2 * (lane % 4) + j;
        out[lane][i][j] = t.mem[static_cast<std::size_t>(at)];
      }
  return out;
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
