// The LSE merge: two partial results over disjoint keys make the result over all of them.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "device_util.hpp"
#include "sim/core/error.hpp"
#include "sim/core/random.hpp"
#include "sim/kernels/reference.hpp"

using namespace cpsim;
using test::make_buffer;

namespace {
const double kInf = std::numeric_limits<double>::infinity();
std::vector<double> first(const std::vector<double>& x, std::int64_t n) {
  return {x.begin(), x.begin() + n};
}
}  // namespace

TEST_CASE("merging attention over two halves of the keys gives attention over all keys, in f64 and f32") {
  const std::int64_t B = 2, S = 20, N = 3, D = 8, half = 9;
  const AttentionShape sh{.B = B, .Sq = S, .Sk = S, .Nq = N, .Nkv = N, .D = D};
  const auto q = normals(1, 0, B * S * N * D), k = normals(1, 1, B * S * N * D), v = normals(1, 2, B * S * N * D);
  const auto pos = iota_positions(0, S);
  const auto ref = reference_forward(q, k, v, sh, pos, pos, true);
  for (DType t : {DType::f64, DType::f32}) {
    Recorder rec;
    CpuDevice dev(rec);
    const Buffer qb = make_buffer(dev, {B, S, N, D}, t, Layout::bsnd, "q", q);
    const Buffer kb = make_buffer(dev, {B, S, N, D}, t, Layout::bsnd, "k", k);
    const Buffer vb = make_buffer(dev, {B, S, N, D}, t, Layout::bsnd, "v", v);
    const Buffer out = dev.alloc({B, S, N, D}, t, Layout::bsnd, "out"),
                 lse = dev.alloc({B, S, N, 1}, t, Layout::bns, "lse");
    const Buffer out2 = dev.alloc({B, S, N, D}, t, Layout::bsnd, "out2"),
                 lse2 = dev.alloc({B, S, N, 1}, t, Layout::bns, "lse2");
    // keys [0, half) into (out, lse), keys [half, S) into (out2, lse2), then merge
    dev.attention_forward(qb, pos, View(kb).rows(0, half), View(vb).rows(0, half), slice(pos, 0, half), out, lse);
    dev.attention_forward(qb, pos, View(kb).rows(half, S - half), View(vb).rows(half, S - half),
                          slice(pos, half, S - half), out2, lse2);
    dev.merge(out, lse, out2, lse2);
    const double tol = t == DType::f64 ? 1e-13 : 1e-5;
    const auto o = download_values(dev, out), l = download_values(dev, lse);
    double worst = 0;
    for (std::size_t i = 0; i < o.size(); ++i) worst = std::max(worst, std::abs(o[i] - ref.out[i]));
    for (std::size_t i = 0; i < l.size(); ++i) worst = std::max(worst, std::abs(l[i] - ref.lse[i]));
    CHECK(worst < tol);
  }
}

TEST_CASE("merging two -inf partials leaves the output unchanged and the lse -inf, never NaN") {
  Recorder rec;
  CpuDevice dev(rec);
  const Buffer out = make_buffer(dev, {1, 2, 1, 3}, DType::f64, Layout::bsnd, "out", {1, 2, 3, 4, 5, 6});
  const Buffer lse = make_buffer(dev, {1, 2, 1, 1}, DType::f64, Layout::bns, "lse", {-kInf, -kInf});
  const Buffer out_t = make_buffer(dev, {1, 2, 1, 3}, DType::f64, Layout::bsnd, "out_t", {9, 9, 9, 9, 9, 9});
  const Buffer lse_t = make_buffer(dev, {1, 2, 1, 1}, DType::f64, Layout::bns, "lse_t", {-kInf, -kInf});
  dev.merge(out, lse, out_t, lse_t);
  CHECK(download_values(dev, out) == std::vector<double>{1, 2, 3, 4, 5, 6});
  CHECK(download_values(dev, lse) == std::vector<double>{-kInf, -kInf});
}

TEST_CASE("merging into an accumulator with no weight yet takes the partial as it is") {
  Recorder rec;
  CpuDevice dev(rec);
  const Buffer out = make_buffer(dev, {1, 1, 1, 2}, DType::f32, Layout::bsnd, "out", {0, 0});
  const Buffer lse = make_buffer(dev, {1, 1, 1, 1}, DType::f32, Layout::bns, "lse", {-kInf});
  const Buffer out_t = make_buffer(dev, {1, 1, 1, 2}, DType::f32, Layout::bsnd, "out_t", {0.25, -3});
  const Buffer lse_t = make_buffer(dev, {1, 1, 1, 1}, DType::f32, Layout::bns, "lse_t", {1.5});
  dev.merge(out, lse, out_t, lse_t);
  CHECK(download_values(dev, out) == std::vector<double>{0.25, -3});
  CHECK(download_values(dev, lse) == std::vector<double>{1.5});
}

TEST_CASE("merging partials whose lse differ by 1000 stays finite and keeps the heavier one") {
  Recorder rec;
  CpuDevice dev(rec);
  const Buffer out = make_buffer(dev, {1, 1, 1, 1}, DType::f32, Layout::bsnd, "out", {2});
  const Buffer lse = make_buffer(dev, {1, 1, 1, 1}, DType::f32, Layout::bns, "lse", {-500});
  const Buffer out_t = make_buffer(dev, {1, 1, 1, 1}, DType::f32, Layout::bsnd, "out_t", {7});
  const Buffer lse_t = make_buffer(dev, {1, 1, 1, 1}, DType::f32, Layout::bns, "lse_t", {500});
  dev.merge(out, lse, out_t, lse_t);
  CHECK(download_values(dev, out)[0] == 7);
  CHECK(download_values(dev, lse)[0] == 500);
}

TEST_CASE("a merge on a subset of rows and heads touches only that subset") {
  Recorder rec;
  CpuDevice dev(rec);
  const std::int64_t B = 2, S = 6, N = 3, D = 2;
  const auto a = normals(3, 0, B * S * N * D), la = normals(3, 1, B * S * N);
  const auto b = normals(3, 2, B * S * N * D), lb = normals(3, 3, B * S * N);
  const Buffer out = make_buffer(dev, {B, S, N, D}, DType::f64, Layout::bsnd, "out", a);
  const Buffer lse = make_buffer(dev, {B, S, N, 1}, DType::f64, Layout::bns, "lse", la);
  // the partial holds only rows 2..4 of heads 1..2: a [B, 3, 2, D] buffer
  const Buffer out_t = make_buffer(dev, {B, 3, 2, D}, DType::f64, Layout::bsnd, "out_t", first(b, B * 3 * 2 * D));
  const Buffer lse_t = make_buffer(dev, {B, 3, 2, 1}, DType::f64, Layout::bns, "lse_t", first(lb, B * 3 * 2));
  dev.merge(View(out).rows(2, 3).heads(1, 2), View(lse).rows(2, 3).heads(1, 2), out_t, lse_t);
  const auto o = download_values(dev, out), l = download_values(dev, lse);
  const auto ot = download_values(dev, out_t), lt = download_values(dev, lse_t);
  for (std::int64_t bb = 0; bb < B; ++bb)
    for (std::int64_t s = 0; s < S; ++s)
      for (std::int64_t h = 0; h < N; ++h) {
        const bool inside = s >= 2 && s < 5 && h >= 1;
        const double l0 = la[lse.offset(bb, s, h)];
        if (!inside) {
          CHECK(l[lse.offset(bb, s, h)] == l0);
          for (std::int64_t d = 0; d < D; ++d) CHECK(o[out.offset(bb, s, h, d)] == a[out.offset(bb, s, h, d)]);
          continue;
        }
        const double l1 = lt[lse_t.offset(bb, s - 2, h - 1)];
        const double merged = std::log(std::exp(l0) + std::exp(l1));  // lse = log(e^a + e^b)
        CHECK(l[lse.offset(bb, s, h)] == doctest::Approx(merged).epsilon(1e-14));
        for (std::int64_t d = 0; d < D; ++d) {
          const double want =
              (std::exp(l0) * a[out.offset(bb, s, h, d)] + std::exp(l1) * ot[out_t.offset(bb, s - 2, h - 1, d)]) /
              (std::exp(l0) + std::exp(l1));
          CHECK(o[out.offset(bb, s, h, d)] == doctest::Approx(want).epsilon(1e-13));
        }
      }
}

TEST_CASE("a merge of views with different extents is refused") {
  Recorder rec;
  CpuDevice dev(rec);
  const Buffer out = dev.alloc({1, 4, 1, 2}, DType::f64, Layout::bsnd, "out"),
               lse = dev.alloc({1, 4, 1, 1}, DType::f64, Layout::bns, "lse");
  CHECK_THROWS_AS(dev.merge(View(out).rows(0, 2), View(lse).rows(0, 2), View(out).rows(0, 3), View(lse).rows(0, 3)),
                  Error);
  const Buffer lse32 = dev.alloc({1, 4, 1, 1}, DType::f32, Layout::bns, "lse32");
  CHECK_THROWS_AS(dev.merge(out, lse, out, lse32), Error);
}
