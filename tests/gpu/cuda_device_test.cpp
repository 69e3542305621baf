// The CUDA device against the f64 reference: the tile forward and backward on zigzag blocks (tensor cores for bf16,
// the simt kernels for f32 and other head dims), rows that see no key, GQA, views inside larger buffers, the LSE merge
// and the elementwise ops.
#include "sim/cuda/cuda_device.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "gpu_support.hpp"
#include "sim/cuda/tile_counts.hpp"
#include "sim/layout/layout.hpp"

using namespace cpsim;
using test::close_enough;
using test::seeded;

namespace {

struct Block {
  AttentionShape shape;
  Positions qp, kp;
  bool causal = true;
  DType dtype = DType::bf16;
  std::vector<double> q, k, v, dout;
};

Block make_block(AttentionShape sh, Positions qp, Positions kp, DType dtype, bool causal = true,
                 std::uint64_t seed = 3) {
  Block b{sh, std::move(qp), std::move(kp), causal, dtype, {}, {}, {}, {}};
  const auto nq = static_cast<std::size_t>(sh.B * sh.Sq * sh.Nq * sh.D),
             nk = static_cast<std::size_t>(sh.B * sh.Sk * sh.Nkv * sh.D);
  b.q = seeded(seed, 0, nq, dtype);
  b.k = seeded(seed, 1, nk, dtype);
  b.v = seeded(seed, 2, nk, dtype);
  b.dout = seeded(seed, 3, nq, dtype);
  return b;
}

struct Result {
  std::vector<double> out, lse, dq, dk, dv;
  WorkCounts fwd, bwd;
  cuda::AttentionPath fwd_path{}, bwd_path{};
};

// Forward, then backward into gradients pre-filled with `prefill` (the result has it subtracted again).
Result run_block(cuda::CudaDevice& dev, const Block& b, double prefill = 0.5) {
  const AttentionShape& s = b.shape;
  const Dims qd{s.B, s.Sq, s.Nq, s.D}, kd{s.B, s.Sk, s.Nkv, s.D};
  const Buffer q = dev.alloc(qd, b.dtype, Layout::bsnd, "q"), k = dev.alloc(kd, b.dtype, Layout::bsnd, "k"),
               v = dev.alloc(kd, b.dtype, Layout::bsnd, "v"), dout = dev.alloc(qd, b.dtype, Layout::bsnd, "dout");
  upload_values(dev, q, b.q);
  upload_values(dev, k, b.k);
  upload_values(dev, v, b.v);
  upload_values(dev, dout, b.dout);
  const Buffer out = dev.alloc(qd, b.dtype, Layout::bsnd, "out");
  const Buffer lse = dev.alloc({s.B, s.Sq, s.Nq, 1}, b.dtype, Layout::bns, "lse");
  Result r;
  r.fwd = dev.attention_forward(View(q), b.qp, View(k), View(v), b.kp, View(out), View(lse), {b.causal, 0, {}});
  r.fwd_path = dev.last_path();
  r.out = download_values(dev, out);
  r.lse = download_values(dev, lse);
  const Buffer dq = dev.alloc(qd, DType::f32, Layout::bsnd, "dq"), dk = dev.alloc(kd, DType::f32, Layout::bsnd, "dk"),
               dv = dev.alloc(kd, DType::f32, Layout::bsnd, "dv");
  for (const Buffer* g : {&dq, &dk, &dv}) dev.fill(View(*g), prefill);
  r.bwd = dev.attention_backward(View(q), b.qp, View(k), View(v), b.kp, View(out), View(lse), View(dout), View(dq),
                                 View(dk), View(dv), {b.causal, 0, {}});
  r.bwd_path = dev.last_path();
  for (auto [buf, dst] : {std::pair{&dq, &r.dq}, std::pair{&dk, &r.dk}, std::pair{&dv, &r.dv}}) {
    *dst = download_values(dev, *buf);
    for (double& x : *dst) x -= prefill;
  }
  return r;
}

void expect_reference(const Block& b, const Result& r) {
  const CheckRule tol = check_rule(b.dtype, true, b.shape.Nq != b.shape.Nkv);
  const RefForward f = reference_forward(b.q, b.k, b.v, b.shape, b.qp, b.kp, b.causal);
  const RefBackward g = reference_backward(b.q, b.k, b.v, b.dout, b.shape, b.qp, b.kp, b.causal);
  close_enough("out", r.out, f.out, tol);
  close_enough("lse", r.lse, f.lse, tol);
  close_enough("dq", r.dq, g.dq, tol);
  close_enough("dk", r.dk, g.dk, tol);
  close_enough("dv", r.dv, g.dv, tol);
}

std::unique_ptr<Device> gpu_device(Recorder& rec, GpuKernel kernel = GpuKernel::automatic) {
  return make_cuda_device(rec, 0, kernel);
}

// The kernels a dtype can run on: bf16 on every one (auto picks mma2), f32 on the simt kernels only.
std::vector<GpuKernel> kernels_for(DType dtype) {
  if (dtype == DType::bf16) return {GpuKernel::automatic, GpuKernel::mma1, GpuKernel::simt};
  return {GpuKernel::automatic};
}
cuda::AttentionPath expected_path(GpuKernel k, DType dtype) {
  if (dtype != DType::bf16 || k == GpuKernel::simt) return cuda::AttentionPath::simt;
  return k == GpuKernel::mma1 ? cuda::AttentionPath::mma1 : cuda::AttentionPath::mma2;
}
cuda::CudaDevice& as_cuda(Device& d) {
  return dynamic_cast<cuda::CudaDevice&>(d);
}

}  // namespace

TEST_CASE("the tile forward and backward match the reference on zigzag blocks, in bf16 and f32, on every kernel") {
  const SeqLayout L(4, 512, Sharding::zigzag);  // chunks of 64: rank 0 [0, 7], 1 [1, 6], 2 [2, 5], 3 [3, 4]
  for (DType dtype : {DType::bf16, DType::f32})
    for (GpuKernel kernel : kernels_for(dtype)) {
      Recorder rec;
      auto dev = gpu_device(rec, kernel);
      const cuda::AttentionPath path = expected_path(kernel, dtype);
      for (std::int64_t D : {64, 128})
        for (auto [qr, kr] : {std::pair{0, 0}, std::pair{1, 2}, std::pair{2, 1}, std::pair{3, 0}}) {
          INFO(dtype_name(dtype) << " --kernel " << gpu_kernel_name(kernel) << " D=" << D << " q of rank " << qr
                                 << ", k/v of rank " << kr);
          const Block b = make_block({2, 128, 128, 4, 4, D}, L.positions(qr), L.positions(kr), dtype);
          const Result r = run_block(as_cuda(*dev), b);
          expect_reference(b, r);
          CHECK(r.fwd_path == path);
          CHECK(r.bwd_path == path);
          int rows = 1, keys = cuda::kSimtKeys;  // the forward's tile (docs/gpu.md)
          if (path != cuda::AttentionPath::simt) {
            rows = path == cuda::AttentionPath::mma2 ? cuda::kMma2ForwardRows : cuda::kMmaRows;
            keys = cuda::kMmaRows;
          }
          const TileCounts t = cuda::count_tiles(b.qp, b.kp, true, rows, keys);
          CHECK(r.fwd.tiles_computed == t.computed * 2 * 4);
          CHECK(r.fwd.tiles_skipped == t.skipped * 2 * 4);
        }
    }
}

TEST_CASE("rows that see no key get out 0, lse -inf and no gradient") {
  const SeqLayout L(4, 512, Sharding::zigzag);
  for (DType dtype : {DType::bf16, DType::f32})
    for (GpuKernel kernel : kernels_for(dtype)) {
      Recorder rec;
      auto dev = gpu_device(rec, kernel);
      INFO(dtype_name(dtype) << " --kernel " << gpu_kernel_name(kernel));
      // q of rank 1 (chunks 1, 6) against k of rank 2 (chunks 2, 5): chunk 1's 64 rows see nothing.
      const Block b = make_block({1, 128, 128, 2, 2, 64}, L.positions(1), L.positions(2), dtype);
      const Result r = run_block(as_cuda(*dev), b);
      expect_reference(b, r);
      for (std::int64_t h = 0; h < 2; ++h)
        for (std::int64_t i = 0; i < 64; ++i) {
          CHECK(std::isinf(r.lse[static_cast<std::size_t>(h * 128 + i)]));
          for (std::int64_t d = 0; d < 64; ++d) {
            const auto at = static_cast<std::size_t>((i * 2 + h) * 64 + d);
            CHECK(r.out[at] == 0.0);
            CHECK(r.dq[at] == 0.0);
          }
        }
    }
}

TEST_CASE("grouped-query attention, odd block sizes and full attention match the reference") {
  for (DType dtype : {DType::bf16, DType::f32})
    for (GpuKernel kernel : kernels_for(dtype)) {
      Recorder rec;
      auto dev = gpu_device(rec, kernel);
      INFO(dtype_name(dtype) << " --kernel " << gpu_kernel_name(kernel));
      // GQA 8/2 on a diagonal block, and a group of 8 (mma2: eight query heads' blocks per KV head, summed after).
      const Block gqa = make_block({2, 96, 96, 8, 2, 64}, iota_positions(0, 96), iota_positions(0, 96), dtype);
      expect_reference(gqa, run_block(as_cuda(*dev), gqa));
      const Block g8 = make_block({1, 200, 200, 8, 1, 128}, iota_positions(0, 200), iota_positions(0, 200), dtype);
      expect_reference(g8, run_block(as_cuda(*dev), g8));
      // 300 queries after 70 earlier keys: mma2's 128-row forward tiles end part-way, and on the diagonal some of a
      // block's warps see none of a key tile.
      const Block tall = make_block({1, 300, 370, 2, 2, 64}, iota_positions(70, 300), iota_positions(0, 370), dtype);
      expect_reference(tall, run_block(as_cuda(*dev), tall));
      // 40 queries against 72 keys that start earlier: partial tiles on both sides.
      const Block odd = make_block({1, 40, 72, 4, 4, 128}, iota_positions(100, 40), iota_positions(60, 72), dtype);
      expect_reference(odd, run_block(as_cuda(*dev), odd));
      // Full (non-causal) attention.
      const Block full =
          make_block({1, 64, 80, 4, 1, 64}, iota_positions(0, 64), iota_positions(500, 80), dtype, false);
      expect_reference(full, run_block(as_cuda(*dev), full));
      // A head dim the tensor-core kernels do not take runs on the simt kernels.
      if (kernel == GpuKernel::automatic) {
        const Block d32 = make_block({1, 64, 64, 4, 4, 32}, iota_positions(0, 64), iota_positions(0, 64), dtype);
        const Result r = run_block(as_cuda(*dev), d32);
        expect_reference(d32, r);
        CHECK(r.fwd_path == cuda::AttentionPath::simt);
      }
    }
}

TEST_CASE("a tensor-core kernel asked for by name refuses a call it cannot take") {
  for (GpuKernel kernel : {GpuKernel::mma2, GpuKernel::mma1}) {
    Recorder rec;
    auto dev = gpu_device(rec, kernel);
    const Block f32 = make_block({1, 64, 64, 2, 2, 64}, iota_positions(0, 64), iota_positions(0, 64), DType::f32);
    CHECK_THROWS_AS(run_block(as_cuda(*dev), f32), UsageError);
  }
}

TEST_CASE("attention calls queue without the host waiting: many calls in a row, then one download, all correct") {
  // More calls than the device has staging slots for positions, each on positions of its own: the slots are reused
  // only once their copies are done, and every call reads its own positions.
  Recorder rec;
  auto dev_owner = gpu_device(rec);
  auto& dev = as_cuda(*dev_owner);
  constexpr int kCalls = 20;
  const Block b =
      make_block({1, 64, 64 + kCalls, 2, 2, 64}, iota_positions(30, 64), iota_positions(0, 64 + kCalls), DType::bf16);
  const Dims qd{1, 64, 2, 64}, kd{1, 64 + kCalls, 2, 64};
  const Buffer q = dev.alloc(qd, DType::bf16, Layout::bsnd, "q"), k = dev.alloc(kd, DType::bf16, Layout::bsnd, "k"),
               v = dev.alloc(kd, DType::bf16, Layout::bsnd, "v");
  upload_values(dev, q, b.q);
  upload_values(dev, k, b.k);
  upload_values(dev, v, b.v);
  const Buffer out = dev.alloc({1, 64 * kCalls, 2, 64}, DType::bf16, Layout::bsnd, "out");
  const Buffer lse = dev.alloc({1, 64 * kCalls, 2, 1}, DType::f32, Layout::bns, "lse");
  // Call c: the 64 queries at positions 30..93 against key rows c .. c+63 at positions 3c .., into rows 64c.. of
  // out: which keys a query sees changes from call to call, so a call reading another call's positions shows.
  for (int c = 0; c < kCalls; ++c)
    dev.attention_forward(View(q), b.qp, View(k).rows(c, 64), View(v).rows(c, 64), iota_positions(3 * c, 64),
                          View(out).rows(64 * c, 64), View(lse).rows(64 * c, 64));
  const auto got = download_values(dev, out);
  const CheckRule tol = check_rule(DType::bf16, true, false);
  for (int c = 0; c < kCalls; ++c) {
    INFO("call " << c);
    std::vector<double> kc(b.k.begin() + c * 2 * 64, b.k.begin() + (c + 64) * 2 * 64),
        vc(b.v.begin() + c * 2 * 64, b.v.begin() + (c + 64) * 2 * 64);
    const RefForward f = reference_forward(b.q, kc, vc, {1, 64, 64, 2, 2, 64}, b.qp, iota_positions(3 * c, 64), true);
    close_enough("out", std::vector<double>(got.begin() + c * 64 * 2 * 64, got.begin() + (c + 1) * 64 * 2 * 64), f.out,
                 tol);
  }
}

TEST_CASE("attention reads and writes only its views inside larger buffers") {
  constexpr double kSentinel = 3.0;
  const std::int64_t D = 64;
  for (DType dtype : {DType::bf16, DType::f32})
    for (GpuKernel kernel : kernels_for(dtype)) {
      Recorder rec;
      auto dev_owner = gpu_device(rec, kernel);
      auto& dev = as_cuda(*dev_owner);
      INFO(dtype_name(dtype) << " --kernel " << gpu_kernel_name(kernel));
      // The block: B=1, 48 rows, 4 query heads, 2 KV heads, inside buffers of 2 batches, 100 rows, 6 heads.
      const Block b = make_block({1, 48, 48, 4, 2, D}, iota_positions(0, 48), iota_positions(0, 48), dtype);
      const Dims big{2, 100, 6, D};
      auto place = [&](const std::vector<double>& x, std::int64_t heads) {  // box: batch 1, rows 10.., heads 1..
        std::vector<double> host(static_cast<std::size_t>(big.numel()), kSentinel);
        for (std::int64_t s = 0; s < 48; ++s)
          for (std::int64_t h = 0; h < heads; ++h)
            for (std::int64_t d = 0; d < D; ++d)
              host[static_cast<std::size_t>(((100 + 10 + s) * 6 + 1 + h) * D + d)] =
                  x[static_cast<std::size_t>((s * heads + h) * D + d)];
        return host;
      };
      auto view = [&](const Buffer& buf, std::int64_t heads) {
        return View(buf).batches(1, 1).rows(10, 48).heads(1, heads);
      };
      Buffer q = dev.alloc(big, dtype, Layout::bsnd, "q"), k = dev.alloc(big, dtype, Layout::bsnd, "k"),
             v = dev.alloc(big, dtype, Layout::bsnd, "v"), dout = dev.alloc(big, dtype, Layout::bsnd, "dout"),
             out = dev.alloc(big, dtype, Layout::bsnd, "out");
      upload_values(dev, q, place(b.q, 4));
      upload_values(dev, k, place(b.k, 2));
      upload_values(dev, v, place(b.v, 2));
      upload_values(dev, dout, place(b.dout, 4));
      upload_values(dev, out, std::vector<double>(static_cast<std::size_t>(big.numel()), kSentinel));
      Buffer lse = dev.alloc({2, 100, 6, 1}, DType::f32, Layout::bns, "lse");
      dev.fill(View(lse), kSentinel);
      Buffer dq = dev.alloc(big, DType::f32, Layout::bsnd, "dq"), dk = dev.alloc(big, DType::f32, Layout::bsnd, "dk"),
             dv = dev.alloc(big, DType::f32, Layout::bsnd, "dv");
      for (Buffer* g : {&dq, &dk, &dv}) dev.fill(View(*g), kSentinel);
      const View lse_v = View(lse).batches(1, 1).rows(10, 48).heads(1, 4);
      dev.attention_forward(view(q, 4), b.qp, view(k, 2), view(v, 2), b.kp, view(out, 4), lse_v);
      dev.attention_backward(view(q, 4), b.qp, view(k, 2), view(v, 2), b.kp, view(out, 4), lse_v, view(dout, 4),
                             view(dq, 4), view(dk, 2), view(dv, 2));
      // Inside the boxes: the reference (gradients were added to the sentinel); outside: the sentinel, untouched.
      auto inside = [&](const std::vector<double>& host, std::int64_t heads, double minus) {
        std::vector<double> x(static_cast<std::size_t>(48 * heads * D));
        for (std::int64_t s = 0; s < 48; ++s)
          for (std::int64_t h = 0; h < heads; ++h)
            for (std::int64_t d = 0; d < D; ++d)
              x[static_cast<std::size_t>((s * heads + h) * D + d)] =
                  host[static_cast<std::size_t>(((100 + 10 + s) * 6 + 1 + h) * D + d)] - minus;
        return x;
      };
      auto outside_untouched = [&](const std::vector<double>& host, std::int64_t heads) {
        std::size_t changed = 0;
        for (std::int64_t bb = 0; bb < 2; ++bb)
          for (std::int64_t s = 0; s < 100; ++s)
            for (std::int64_t h = 0; h < 6; ++h) {
              const bool in = bb == 1 && s >= 10 && s < 58 && h >= 1 && h < 1 + heads;
              for (std::int64_t d = 0; d < D && !in; ++d)
                changed += host[static_cast<std::size_t>(((bb * 100 + s) * 6 + h) * D + d)] != kSentinel;
            }
        return changed;
      };
      const CheckRule tol = check_rule(dtype, true, true);
      const RefForward f = reference_forward(b.q, b.k, b.v, b.shape, b.qp, b.kp, true);
      const RefBackward g = reference_backward(b.q, b.k, b.v, b.dout, b.shape, b.qp, b.kp, true);
      const auto out_h = download_values(dev, out), dq_h = download_values(dev, dq), dk_h = download_values(dev, dk),
                 dv_h = download_values(dev, dv), lse_h = download_values(dev, lse);
      close_enough("out", inside(out_h, 4, 0), f.out, tol);
      close_enough("dq", inside(dq_h, 4, kSentinel), g.dq, tol);
      close_enough("dk", inside(dk_h, 2, kSentinel), g.dk, tol);
      close_enough("dv", inside(dv_h, 2, kSentinel), g.dv, tol);
      CHECK(outside_untouched(out_h, 4) == 0);
      CHECK(outside_untouched(dq_h, 4) == 0);
      CHECK(outside_untouched(dk_h, 2) == 0);
      CHECK(outside_untouched(dv_h, 2) == 0);
      std::vector<double> lse_in;
      std::size_t lse_changed = 0;
      for (std::int64_t bb = 0; bb < 2; ++bb)
        for (std::int64_t h = 0; h < 6; ++h)
          for (std::int64_t s = 0; s < 100; ++s) {
            const double x = lse_h[static_cast<std::size_t>((bb * 6 + h) * 100 + s)];
            const bool in = bb == 1 && h >= 1 && h < 5 && s >= 10 && s < 58;
            if (in)
              lse_in.push_back(x);
            else
              lse_changed += x != kSentinel;
          }
      close_enough("lse", lse_in, f.lse, tol);
      CHECK(lse_changed == 0);
    }
}

TEST_CASE("merging two halves of the keys by their LSE gives attention over all of them, on a row subset too") {
  Recorder rec;
  auto dev_owner = gpu_device(rec);
  auto& dev = as_cuda(*dev_owner);
  for (DType dtype : {DType::bf16, DType::f32}) {
    INFO(dtype_name(dtype));
    // 32 queries at positions 40..71 against keys 0..79, computed as two halves [0, 40) and [40, 80) (every query
    // sees all of the first half and a prefix of the second), then merged.
    const Block b = make_block({1, 32, 80, 4, 4, 64}, iota_positions(40, 32), iota_positions(0, 80), dtype);
    const Dims qd{1, 32, 4, 64}, kd{1, 80, 4, 64};
    const Buffer q = dev.alloc(qd, dtype, Layout::bsnd, "q"), k = dev.alloc(kd, dtype, Layout::bsnd, "k"),
                 v = dev.alloc(kd, dtype, Layout::bsnd, "v");
    upload_values(dev, q, b.q);
    upload_values(dev, k, b.k);
    upload_values(dev, v, b.v);
    const Buffer out = dev.alloc(qd, dtype, Layout::bsnd, "out"), out2 = dev.alloc(qd, dtype, Layout::bsnd, "out2");
    const Buffer lse = dev.alloc({1, 32, 4, 1}, dtype, Layout::bns, "lse"),
                 lse2 = dev.alloc({1, 32, 4, 1}, dtype, Layout::bns, "lse2");
    CHECK(lse.dtype() == DType::f32);  // the log-sum-exp stays f32 for bf16 inputs
    const Positions first = iota_positions(0, 40), second = iota_positions(40, 40);
    dev.attention_forward(View(q), b.qp, View(k).rows(0, 40), View(v).rows(0, 40), first, View(out), View(lse));
    dev.attention_forward(View(q), b.qp, View(k).rows(40, 40), View(v).rows(40, 40), second, View(out2), View(lse2));
    // Merge rows [8, 32) only: rows 0..7 must keep the first half's result.
    const auto before = download_values(dev, out);
    dev.merge(View(out).rows(8, 24), View(lse).rows(8, 24), View(out2).rows(8, 24), View(lse2).rows(8, 24));
    const auto merged = download_values(dev, out);
    const RefForward all = reference_forward(b.q, b.k, b.v, b.shape, b.qp, b.kp, true);
    const CheckRule tol = check_rule(dtype, true, false);
    std::vector<double> got(merged.begin() + 8 * 4 * 64, merged.end()),
        want(all.out.begin() + 8 * 4 * 64, all.out.end());
    close_enough("merged out", got, want, tol);
    CHECK(std::equal(before.begin(), before.begin() + 8 * 4 * 64, merged.begin()));
  }
}

TEST_CASE("merge leaves rows whose partial result saw no key unchanged, never NaN") {
  Recorder rec;
  auto dev_owner = gpu_device(rec);
  auto& dev = as_cuda(*dev_owner);
  for (DType dtype : {DType::bf16, DType::f32}) {
    const Dims od{1, 4, 1, 64};
    const Buffer out = dev.alloc(od, dtype, Layout::bsnd, "out"), out_t = dev.alloc(od, dtype, Layout::bsnd, "out_t");
    const Buffer lse = dev.alloc({1, 4, 1, 1}, DType::f32, Layout::bns, "lse"),
                 lse_t = dev.alloc({1, 4, 1, 1}, DType::f32, Layout::bns, "lse_t");
    std::vector<double> o(4 * 64, 0.0), ot(4 * 64, 2.0);
    for (int d = 0; d < 64; ++d) o[64 + d] = 1.0;  // row 1 holds a result
    upload_values(dev, out, o);
    upload_values(dev, out_t, ot);
    // rows: 0 both -inf, 1 acc 0.5 / tile -inf, 2 acc -inf / tile 0.25, 3 both log(1) = 0.
    upload_values(dev, lse, {-INFINITY, 0.5, -INFINITY, 0.0});
    upload_values(dev, lse_t, {-INFINITY, -INFINITY, 0.25, 0.0});
    dev.merge(View(out), View(lse), View(out_t), View(lse_t));
    const auto got = download_values(dev, out), l = download_values(dev, lse);
    CHECK(std::isinf(l[0]));
    CHECK(l[1] == doctest::Approx(0.5));
    CHECK(l[2] == doctest::Approx(0.25));
    CHECK(l[3] == doctest::Approx(std::log(2.0)).epsilon(1e-6));
    for (int d = 0; d < 64; ++d) {
      CHECK(got[d] == 0.0);
      CHECK(got[64 + d] == 1.0);
      CHECK(got[128 + d] == 2.0);
      CHECK(got[192 + d] == doctest::Approx(1.0));  // (0 + 2) / 2
    }
  }
}

TEST_CASE("copy converts between f32 and bf16, add accumulates, fill writes only its view") {
  Recorder rec;
  auto dev = gpu_device(rec);
  const Dims d{2, 5, 3, 8};
  const auto n = static_cast<std::size_t>(d.numel());
  const std::vector<double> x = test::seeded(9, 0, n, DType::f64);
  const Buffer f = dev->alloc(d, DType::f32, Layout::bsnd, "f"), h = dev->alloc(d, DType::bf16, Layout::bsnd, "h");
  upload_values(*dev, f, x);
  dev->copy(View(h), View(f));
  const auto hb = download_values(*dev, h);
  for (std::size_t i = 0; i < n; ++i) CHECK(hb[i] == round_to_bf16(static_cast<float>(x[i])));
  dev->add(View(f), View(h));  // f = x + bf16(x)
  const auto sum = download_values(*dev, f);
  for (std::size_t i = 0; i < n; ++i)
    CHECK(sum[i] == static_cast<double>(static_cast<float>(static_cast<float>(x[i]) + static_cast<float>(hb[i]))));
  // A box copy between different heads and rows.
  const Buffer g = dev->alloc(d, DType::f32, Layout::bsnd, "g");
  dev->copy(View(g).batches(1, 1).rows(1, 3).heads(0, 2), View(h).batches(0, 1).rows(2, 3).heads(1, 2));
  const auto gh = download_values(*dev, g);
  for (std::int64_t s = 0; s < 5; ++s)
    for (std::int64_t hh = 0; hh < 3; ++hh)
      for (std::int64_t e = 0; e < 8; ++e) {
        const bool in = s >= 1 && s < 4 && hh < 2;
        const double want = in ? hb[static_cast<std::size_t>(((0 * 5 + s + 1) * 3 + hh + 1) * 8 + e)] : 0.0;
        CHECK(gh[static_cast<std::size_t>(((1 * 5 + s) * 3 + hh) * 8 + e)] == want);
      }
  // fill -inf on part of an LSE buffer.
  const Buffer lse = dev->alloc({2, 5, 3, 1}, DType::bf16, Layout::bns, "lse");
  dev->fill(View(lse).heads(1, 2).rows(1, 3), -INFINITY);
  const auto lh = download_values(*dev, lse);
  int inf = 0;
  for (double v : lh) inf += std::isinf(v) ? 1 : (v == 0.0 ? 0 : 1000);
  CHECK(inf == 2 * 2 * 3);
}

TEST_CASE("the CUDA device refuses f64 buffers and counts its memory") {
  Recorder rec;
  auto dev = gpu_device(rec);
  CHECK_THROWS_AS(dev->alloc({1, 4, 1, 8}, DType::f64, Layout::bsnd, "x"), UsageError);
  {
    const Buffer a = dev->alloc({1, 1024, 4, 64}, DType::bf16, Layout::bsnd, "a");
    CHECK(rec.memory()->current.load() == 1024 * 4 * 64 * 2);
  }
  CHECK(rec.memory()->current.load() == 0);
  CHECK(rec.peak_bytes() == 1024 * 4 * 64 * 2);
}
