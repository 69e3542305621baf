// The CPU device: zeroed buffers counted in the memory meter, views honoured by fill/copy/add, work recorded.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "device_util.hpp"
#include "sim/core/error.hpp"
#include "sim/core/random.hpp"

using namespace cpsim;
using test::make_buffer;

TEST_CASE("a fresh buffer is zero-filled and its bytes count toward the rank's peak until the last handle goes") {
  Recorder rec;
  CpuDevice dev(rec);
  {
    const Buffer a = dev.alloc({2, 3, 4, 5}, DType::f32, Layout::bsnd, "a");
    CHECK(a.bytes() == 2 * 3 * 4 * 5 * 4);
    for (double x : download_values(dev, a)) REQUIRE(x == 0);
    const Buffer b = dev.alloc({1, 10, 1, 1}, DType::f64, Layout::bns, "b");
    CHECK(rec.memory()->current == 480 + 80);
    Buffer copy_of_b = b;  // a second handle shares the storage
    CHECK(rec.memory()->current == 560);
  }
  CHECK(rec.memory()->current == 0);
  CHECK(rec.peak_bytes() == 560);
}

TEST_CASE("a buffer that outlives its device still returns its bytes to the meter") {
  Recorder rec;
  Buffer kept;
  {
    CpuDevice dev(rec);
    kept = dev.alloc({1, 8, 1, 8}, DType::f64, Layout::bsnd, "kept");
  }
  CHECK(rec.memory()->current == 512);
  kept = Buffer();
  CHECK(rec.memory()->current == 0);
}

TEST_CASE("bf16 buffers are refused with a usage error naming the fix") {
  Recorder rec;
  CpuDevice dev(rec);
  CHECK_THROWS_WITH_AS(dev.alloc({1, 1, 1, 1}, DType::bf16, Layout::bsnd, "x"),
                       "bf16 needs a GPU device; use --dtype f32 or f64", UsageError);
  CHECK_THROWS_AS(CpuDevice(rec, 0), UsageError);
}

TEST_CASE("fill, copy and add on strided views touch exactly the boxed elements, converting dtypes") {
  Recorder rec;
  CpuDevice dev(rec);
  const Dims dims{2, 5, 4, 3};
  const auto src_vals = normals(6, 0, dims.numel());
  const Buffer src = make_buffer(dev, dims, DType::f64, Layout::bsnd, "src", src_vals);
  const Buffer dst = make_buffer(dev, {3, 6, 3, 3}, DType::f32, Layout::bsnd, "dst", {}, 7.0);
  // box: batch 1, rows 1..3, heads 1..2 of src  ->  batch 2, rows 3..5, heads 0..1 of dst
  const View from = View(src).batches(1, 1).rows(1, 3).heads(1, 2);
  const View to = View(dst).batches(2, 1).rows(3, 3).heads(0, 2);
  dev.copy(to, from);
  dev.add(to, from);  // now twice the source
  dev.fill(View(dst).batches(0, 1).rows(0, 1).heads(2, 1), -1.5);
  const auto d = download_values(dev, dst);
  for (std::int64_t b = 0; b < 3; ++b)
    for (std::int64_t s = 0; s < 6; ++s)
      for (std::int64_t h = 0; h < 3; ++h)
        for (std::int64_t e = 0; e < 3; ++e) {
          const double got = d[dst.offset(b, s, h, e)];
          if (b == 2 && s >= 3 && h <= 1) {
            const double want = static_cast<float>(2 * static_cast<float>(src_vals[src.offset(1, s - 2, h + 1, e)]));
            CHECK(got == want);
          } else if (b == 0 && s == 0 && h == 2) {
            CHECK(got == -1.5);
          } else {
            CHECK(got == 7.0);
          }
        }
}

TEST_CASE("fill, copy and add work on [B, N, S] views: a box of rows for a subset of heads") {
  Recorder rec;
  CpuDevice dev(rec);
  const Buffer a = make_buffer(dev, {2, 8, 3, 1}, DType::f64, Layout::bns, "a", {}, 1.0);
  const Buffer b = make_buffer(dev, {2, 4, 3, 1}, DType::f64, Layout::bns, "b", normals(2, 0, 24));
  const auto bv = download_values(dev, b);
  dev.fill(View(a).rows(0, 2), -std::numeric_limits<double>::infinity());
  dev.copy(View(a).rows(4, 4).heads(1, 2), View(b).heads(0, 2));
  const auto av = download_values(dev, a);
  for (std::int64_t bb = 0; bb < 2; ++bb)
    for (std::int64_t h = 0; h < 3; ++h)
      for (std::int64_t s = 0; s < 8; ++s) {
        const double got = av[a.offset(bb, s, h)];
        if (s < 2)
          CHECK(got == -std::numeric_limits<double>::infinity());
        else if (s >= 4 && h >= 1)
          CHECK(got == bv[b.offset(bb, s - 4, h - 1)]);
        else
          CHECK(got == 1.0);
      }
}

TEST_CASE("copy between views of different extents or layouts is refused") {
  Recorder rec;
  CpuDevice dev(rec);
  const Buffer a = dev.alloc({1, 4, 2, 3}, DType::f32, Layout::bsnd, "a");
  const Buffer l = dev.alloc({1, 4, 2, 1}, DType::f32, Layout::bns, "l");
  CHECK_THROWS_AS(dev.copy(View(a).rows(0, 2), View(a).rows(0, 3)), Error);
  CHECK_THROWS_AS(dev.add(View(a).heads(0, 1), View(a).heads(0, 2)), Error);
  const Buffer a1 = dev.alloc({1, 4, 2, 1}, DType::f32, Layout::bsnd, "a1");
  CHECK_THROWS_AS(dev.copy(a1, l), Error);
}

TEST_CASE("the device records visible pairs x B x Nq, useful flops and tile counts for every attention call") {
  Recorder rec;
  CpuDevice dev(rec, 8);
  const std::int64_t B = 2, S = 24, Nq = 4, Nkv = 2, D = 16;
  const Buffer q = make_buffer(dev, {B, S, Nq, D}, DType::f32, Layout::bsnd, "q", normals(1, 0, B * S * Nq * D));
  const Buffer k = make_buffer(dev, {B, S, Nkv, D}, DType::f32, Layout::bsnd, "k", normals(1, 1, B * S * Nkv * D));
  const Buffer v = make_buffer(dev, {B, S, Nkv, D}, DType::f32, Layout::bsnd, "v", normals(1, 2, B * S * Nkv * D));
  const Buffer out = dev.alloc({B, S, Nq, D}, DType::f32, Layout::bsnd, "out");
  const Buffer lse = dev.alloc({B, S, Nq, 1}, DType::f32, Layout::bns, "lse");
  const Buffer dq = dev.alloc({B, S, Nq, D}, DType::f32, Layout::bsnd, "dq");
  const Buffer dk = dev.alloc({B, S, Nkv, D}, DType::f32, Layout::bsnd, "dk");
  const Buffer dv = dev.alloc({B, S, Nkv, D}, DType::f32, Layout::bsnd, "dv");
  const auto pos = iota_positions(0, S);
  const WorkCounts f = dev.attention_forward(q, pos, k, v, pos, out, lse);
  const std::int64_t pairs = S * (S + 1) / 2 * B * Nq;  // causal: row i sees i + 1 keys
  CHECK(f.pairs == pairs);
  CHECK(f.flops == 4.0 * D * pairs);
  // 3 x 3 tiles of 8 rows per (batch, head): 6 on or below the diagonal computed, 3 above it skipped
  CHECK(f.tiles_computed == 6 * B * Nq);
  CHECK(f.tiles_skipped == 3 * B * Nq);
  const WorkCounts b = dev.attention_backward(q, pos, k, v, pos, out, lse, out, dq, dk, dv);
  CHECK(b.pairs == pairs);
  CHECK(b.flops == 10.0 * D * pairs);
  CHECK(b.tiles_computed == f.tiles_computed);
  CHECK(rec.total_work().pairs == 2 * pairs);
  CHECK(rec.total_work().calls == 2);
  const std::int64_t bytes = 4 * (3 * B * S * Nq * D + 4 * B * S * Nkv * D + B * S * Nq);  // q out dq, k v dk dv, lse
  CHECK(rec.peak_bytes() == bytes);
}

TEST_CASE("a block with no visible pair is recorded as skipped and gives zero output and -inf lse") {
  Recorder rec;
  CpuDevice dev(rec);
  const Buffer q = make_buffer(dev, {1, 4, 1, 2}, DType::f64, Layout::bsnd, "q", {}, 1.0);
  const Buffer k = make_buffer(dev, {1, 4, 1, 2}, DType::f64, Layout::bsnd, "k", {}, 1.0);
  const Buffer out = make_buffer(dev, {1, 4, 1, 2}, DType::f64, Layout::bsnd, "out", {}, 5.0);
  const Buffer lse = dev.alloc({1, 4, 1, 1}, DType::f64, Layout::bns, "lse");
  const WorkCounts w = dev.attention_forward(q, iota_positions(0, 4), k, k, iota_positions(4, 4), out, lse);
  CHECK(w.skipped_calls == 1);
  CHECK(w.pairs == 0);
  CHECK(rec.total_work().skipped_calls == 1);
  for (double x : download_values(dev, out)) CHECK(x == 0);
  for (double x : download_values(dev, lse)) CHECK(x == -std::numeric_limits<double>::infinity());
}

TEST_CASE("attention on buffers of mixed dtypes is refused") {
  Recorder rec;
  CpuDevice dev(rec);
  const Buffer q = dev.alloc({1, 2, 1, 2}, DType::f32, Layout::bsnd, "q");
  const Buffer k = dev.alloc({1, 2, 1, 2}, DType::f64, Layout::bsnd, "k");
  const Buffer out = dev.alloc({1, 2, 1, 2}, DType::f32, Layout::bsnd, "out");
  const Buffer lse = dev.alloc({1, 2, 1, 1}, DType::f32, Layout::bns, "lse");
  const auto pos = iota_positions(0, 2);
  CHECK_THROWS_WITH_AS(dev.attention_forward(q, pos, k, k, pos, out, lse), doctest::Contains("one dtype"), Error);
}
