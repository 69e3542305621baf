// The tiled kernel against the f64 reference: forward and backward, f64 and f32, over shapes, masks, tiles,
// zigzag positions and strided views.
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <limits>

#include "sim/core/error.hpp"
#include "sim/core/random.hpp"
#include "sim/kernels/check.hpp"
#include "sim/kernels/cpu_device.hpp"
#include "sim/kernels/host_io.hpp"
#include "sim/kernels/plain.hpp"
#include "sim/kernels/single_run.hpp"
#include "sim/layout/layout.hpp"
#include "sim/runtime/inputs.hpp"

using namespace cpsim;

namespace {

// The check under the CPU rule for the dtype (check.hpp).
CheckReport cpu_check(const AttentionProblem& p, DType dtype, const RefForward& f, const RefBackward* b) {
  return check_against_reference(p, check_rule(dtype, false, p.shape.Nq != p.shape.Nkv), f, b);
}

// Runs the tiled kernel on the problem and checks it with the project's rule (check.hpp).
CheckReport tiled_check(const AttentionProblem& p, DType dtype, int tile) {
  Recorder rec;
  CpuDevice dev(rec, tile);
  const SingleRun r = run_single_device(dev, p, dtype);
  return cpu_check(p, dtype, r.fwd, &r.bwd);
}

void require_passed(const CheckReport& c) {
  INFO("out ", c.err.out, " <= ", c.allowed.out, ";  lse ", c.err.lse, " <= ", c.allowed.lse);
  INFO("dq ", c.err.dq, " <= ", c.allowed.dq, ";  dk ", c.err.dk, " <= ", c.allowed.dk, ";  dv ", c.err.dv,
       " <= ", c.allowed.dv);
  CHECK(c.backward);
  CHECK(c.passed);
}

}  // namespace

TEST_CASE("the tiled kernel matches the f64 reference to 1e-10 in f64 over head dims, GQA and masks") {
  for (std::int64_t D : {16, 64, 128})
    for (auto [nq, nkv] : {std::pair<std::int64_t, std::int64_t>{8, 2}, {8, 1}})
      for (bool causal : {true, false}) {
        CAPTURE(D);
        CAPTURE(nq);
        CAPTURE(nkv);
        CAPTURE(causal);
        const AttentionShape sh{.B = 2, .Sq = 77, .Sk = 77, .Nq = nq, .Nkv = nkv, .D = D};  // 77: not a tile multiple
        const auto c = tiled_check(attention_problem(sh, causal, DType::f64, 11), DType::f64, 32);
        require_passed(c);
        CHECK(c.allowed.out == kF64Tolerance);
      }
}

TEST_CASE("the tiled kernel in f32 stays within twice the plain f32 error over head dims, GQA and masks") {
  for (std::int64_t D : {16, 64, 128})
    for (auto [nq, nkv] : {std::pair<std::int64_t, std::int64_t>{8, 2}, {8, 1}})
      for (bool causal : {true, false}) {
        CAPTURE(D);
        CAPTURE(nq);
        CAPTURE(nkv);
        CAPTURE(causal);
        const AttentionShape sh{.B = 2, .Sq = 77, .Sk = 77, .Nq = nq, .Nkv = nkv, .D = D};
        const auto c = tiled_check(attention_problem(sh, causal, DType::f32, 12), DType::f32, 32);
        require_passed(c);
        CHECK(c.baseline.out > 0);  // the baseline really is single precision
        CHECK(c.baseline.dq > 0);
      }
}

TEST_CASE("the tiled kernel gives the same results for every tile size, including one row and more than S") {
  const AttentionShape sh{.B = 1, .Sq = 45, .Sk = 45, .Nq = 2, .Nkv = 1, .D = 16};
  const AttentionProblem p = attention_problem(sh, true, DType::f64, 3);
  for (int tile : {1, 7, 16, 45, 64}) {
    CAPTURE(tile);
    require_passed(tiled_check(p, DType::f64, tile));
  }
}

TEST_CASE("the tiled kernel matches the reference on zigzag shards: every rank's queries against every rank's keys") {
  const SeqLayout L(4, 96, Sharding::zigzag);  // chunks of 12; rank r owns chunks r and 7 - r
  for (int qr = 0; qr < 4; ++qr)
    for (int kr = 0; kr < 4; ++kr) {
      CAPTURE(qr);
      CAPTURE(kr);
      const AttentionShape sh{.B = 2, .Sq = 24, .Sk = 24, .Nq = 4, .Nkv = 2, .D = 16};
      AttentionProblem p = attention_problem(sh, true, DType::f64, 100 + qr * 4 + kr);
      p.q_pos = L.positions(qr);
      p.k_pos = L.positions(kr);
      require_passed(tiled_check(p, DType::f64, 8));  // tiles of 8 straddle nothing: chunks are 12 long
      require_passed(tiled_check(p, DType::f64, 5));  // tiles of 5 straddle the gap between the two chunks
    }
}

TEST_CASE("rows that see no key get zero output, -inf lse and zero gradients, never NaN") {
  for (DType t : {DType::f64, DType::f32}) {
    const AttentionShape sh{.B = 2, .Sq = 20, .Sk = 30, .Nq = 2, .Nkv = 1, .D = 16};
    AttentionProblem p = attention_problem(sh, true, t, 21);
    p.q_pos = iota_positions(0, 20);   // queries 0..19
    p.k_pos = iota_positions(10, 30);  // keys 10..39: queries 0..9 see nothing
    Recorder rec;
    CpuDevice dev(rec, 8);
    const SingleRun r = run_single_device(dev, p, t);
    for (std::int64_t b = 0; b < 2; ++b)
      for (std::int64_t h = 0; h < 2; ++h)
        for (std::int64_t i = 0; i < 20; ++i) {
          const double lse = r.fwd.lse[(b * 2 + h) * 20 + i];
          if (i < 10) {
            CHECK(lse == -std::numeric_limits<double>::infinity());
            for (std::int64_t d = 0; d < 16; ++d) {
              CHECK(r.fwd.out[((b * 20 + i) * 2 + h) * 16 + d] == 0);
              CHECK(r.bwd.dq[((b * 20 + i) * 2 + h) * 16 + d] == 0);
            }
          } else {
            CHECK(std::isfinite(lse));
          }
        }
    for (const auto* x : {&r.bwd.dk, &r.bwd.dv})
      for (double e : *x) REQUIRE(std::isfinite(e));
    const auto c = cpu_check(p, t, r.fwd, &r.bwd);
    require_passed(c);
  }
}

TEST_CASE("scores scaled x30 stay finite and still match the reference") {
  for (DType t : {DType::f64, DType::f32}) {
    CAPTURE(dtype_name(t));
    const AttentionShape sh{.B = 1, .Sq = 50, .Sk = 50, .Nq = 2, .Nkv = 2, .D = 64};
    AttentionProblem p = attention_problem(sh, true, t, 30);
    for (double& x : p.q) x *= 30;
    for (double& x : p.q) x = round_to_dtype(x, t);  // the f32 kernel must see exactly the reference's inputs
    Recorder rec;
    CpuDevice dev(rec, 16);
    const SingleRun r = run_single_device(dev, p, t);
    for (const auto* x : {&r.fwd.out, &r.fwd.lse, &r.bwd.dq, &r.bwd.dk, &r.bwd.dv})
      for (double e : *x) REQUIRE(std::isfinite(e));
    double max_lse = 0;
    for (double l : r.fwd.lse) max_lse = std::max(max_lse, l);
    CHECK(max_lse > std::log(FLT_MAX));  // the scores really are large: exp(lse) would overflow a float
    require_passed(cpu_check(p, t, r.fwd, &r.bwd));
  }
}

TEST_CASE("a wholly masked tile is skipped without reading its keys and values") {
  // Queries 0..31, keys 0..95, tiles of 32: key tiles 1 and 2 lie after every query. Poisoning them with NaN
  // shows they are never read (a single read would turn the output into NaN).
  const AttentionShape sh{.B = 1, .Sq = 32, .Sk = 96, .Nq = 2, .Nkv = 1, .D = 16};
  AttentionProblem p = attention_problem(sh, true, DType::f32, 40);
  const AttentionProblem clean = p;
  for (std::size_t i = 32 * 16; i < p.k.size(); ++i) p.k[i] = p.v[i] = std::nan("");
  Recorder rec;
  CpuDevice dev(rec, 32);
  const SingleRun r = run_single_device(dev, p, DType::f32);
  CHECK(r.fwd_work.tiles_computed == 2);  // one per head
  CHECK(r.fwd_work.tiles_skipped == 4);
  CHECK(r.bwd_work.tiles_skipped == 4);
  for (std::size_t i = 32 * 16; i < r.bwd.dk.size(); ++i) REQUIRE(r.bwd.dk[i] == 0);
  require_passed(cpu_check(clean, DType::f32, r.fwd, &r.bwd));
}

TEST_CASE("the backward adds into dq, dk and dv instead of overwriting them") {
  const AttentionShape sh{.B = 1, .Sq = 20, .Sk = 20, .Nq = 2, .Nkv = 1, .D = 8};
  const AttentionProblem p = attention_problem(sh, true, DType::f64, 50);
  Recorder rec;
  CpuDevice dev(rec, 8);
  const Dims qd{1, 20, 2, 8}, kd{1, 20, 1, 8};
  auto up = [&](Dims d, Layout l, const char* n, const std::vector<double>& x) {
    const Buffer b = dev.alloc(d, DType::f64, l, n);
    upload_values(dev, b, x);
    return b;
  };
  const Buffer q = up(qd, Layout::bsnd, "q", p.q), k = up(kd, Layout::bsnd, "k", p.k),
               v = up(kd, Layout::bsnd, "v", p.v);
  const Buffer dout = up(qd, Layout::bsnd, "dout", p.dout);
  const Buffer out = dev.alloc(qd, DType::f64, Layout::bsnd, "out"),
               lse = dev.alloc({1, 20, 2, 1}, DType::f64, Layout::bns, "lse");
  const Buffer dq = dev.alloc(qd, DType::f64, Layout::bsnd, "dq"), dk = dev.alloc(kd, DType::f64, Layout::bsnd, "dk"),
               dv = dev.alloc(kd, DType::f64, Layout::bsnd, "dv");
  dev.attention_forward(q, p.q_pos, k, v, p.k_pos, out, lse);
  dev.attention_backward(q, p.q_pos, k, v, p.k_pos, out, lse, dout, dq, dk, dv);
  const auto once = download_values(dev, dk);
  dev.attention_backward(q, p.q_pos, k, v, p.k_pos, out, lse, dout, dq, dk, dv);
  const auto twice = download_values(dev, dk);
  const auto ref = reference_backward(p.q, p.k, p.v, p.dout, sh, p.q_pos, p.k_pos, true);
  CHECK(max_abs_error(once, ref.dk) < 1e-12);
  for (std::size_t i = 0; i < once.size(); ++i) CHECK(twice[i] == doctest::Approx(2 * once[i]).epsilon(1e-14));
}

TEST_CASE("the kernel reads and writes strided views inside larger buffers and leaves the rest untouched") {
  // q, out, dq, dout: batch 1, rows 3..27, heads 1..4 of [3, 30, 6, D]; k, v, dk, dv: batch 0, rows 2..26,
  // heads 2..3 of [2, 28, 5, D]; lse: batch 2, rows 1..25, heads 0..3 of [3, 27, 5].
  const std::int64_t S = 25, Nq = 4, Nkv = 2, D = 16;
  const AttentionShape sh{.B = 1, .Sq = S, .Sk = S, .Nq = Nq, .Nkv = Nkv, .D = D};
  for (DType t : {DType::f64, DType::f32}) {
    const AttentionProblem p = attention_problem(sh, true, t, 60);
    Recorder rec;
    CpuDevice dev(rec, 8);
    const double sentinel = 7;
    auto big = [&](Dims d, Layout l, const char* n) {
      const Buffer b = dev.alloc(d, t, l, n);
      dev.fill(b, sentinel);
      return b;
    };
    const Buffer Q = big({3, 30, 6, D}, Layout::bsnd, "Q"), O = big({3, 30, 6, D}, Layout::bsnd, "O"),
                 DQ = big({3, 30, 6, D}, Layout::bsnd, "DQ"), DO = big({3, 30, 6, D}, Layout::bsnd, "DO");
    const Buffer K = big({2, 28, 5, D}, Layout::bsnd, "K"), V = big({2, 28, 5, D}, Layout::bsnd, "V"),
                 DK = big({2, 28, 5, D}, Layout::bsnd, "DK"), DV = big({2, 28, 5, D}, Layout::bsnd, "DV");
    const Buffer L = big({3, 27, 5, 1}, Layout::bns, "L");
    auto qbox = [&](const Buffer& b) { return View(b).batches(1, 1).rows(3, S).heads(1, Nq); };
    auto kbox = [&](const Buffer& b) { return View(b).batches(0, 1).rows(2, S).heads(2, Nkv); };
    const View lbox = View(L).batches(2, 1).rows(1, S).heads(0, Nq);
    // Inputs reach the boxes through a device copy from packed buffers.
    auto packed = [&](Dims d, const std::vector<double>& x) {
      const Buffer b = dev.alloc(d, t, Layout::bsnd, "packed");
      upload_values(dev, b, x);
      return b;
    };
    dev.copy(qbox(Q), packed({1, S, Nq, D}, p.q));
    dev.copy(qbox(DO), packed({1, S, Nq, D}, p.dout));
    dev.copy(kbox(K), packed({1, S, Nkv, D}, p.k));
    dev.copy(kbox(V), packed({1, S, Nkv, D}, p.v));
    dev.fill(qbox(DQ), 0);
    dev.fill(kbox(DK), 0);
    dev.fill(kbox(DV), 0);
    dev.attention_forward(qbox(Q), p.q_pos, kbox(K), kbox(V), p.k_pos, qbox(O), lbox);
    dev.attention_backward(qbox(Q), p.q_pos, kbox(K), kbox(V), p.k_pos, qbox(O), lbox, qbox(DO), qbox(DQ), kbox(DK),
                           kbox(DV));
    // Read the boxes back through packed buffers.
    auto unpack = [&](const View& box, Dims d) {
      const Buffer b = dev.alloc(d, t, box.buf.layout(), "unpacked");
      dev.copy(b, box);
      return download_values(dev, b);
    };
    SingleRun r;
    r.fwd.out = unpack(qbox(O), {1, S, Nq, D});
    r.fwd.lse = unpack(lbox, {1, S, Nq, 1});
    r.bwd.dq = unpack(qbox(DQ), {1, S, Nq, D});
    r.bwd.dk = unpack(kbox(DK), {1, S, Nkv, D});
    r.bwd.dv = unpack(kbox(DV), {1, S, Nkv, D});
    require_passed(cpu_check(p, t, r.fwd, &r.bwd));
    // Everything outside the boxes still holds the sentinel.
    auto outside_untouched = [&](const Buffer& b, auto inside) {
      const auto x = download_values(dev, b);
      std::int64_t bad = 0;
      for (std::int64_t bb = 0; bb < b.dims().b; ++bb)
        for (std::int64_t s = 0; s < b.dims().s; ++s)
          for (std::int64_t h = 0; h < b.dims().n; ++h)
            for (std::int64_t d = 0; d < b.dims().d; ++d)
              if (!inside(bb, s, h) && x[b.offset(bb, s, h, d)] != sentinel) ++bad;
      return bad;
    };
    auto in_q = [&](std::int64_t b, std::int64_t s, std::int64_t h) {
      return b == 1 && s >= 3 && s < 3 + S && h >= 1 && h < 1 + Nq;
    };
    auto in_k = [&](std::int64_t b, std::int64_t s, std::int64_t h) {
      return b == 0 && s >= 2 && s < 2 + S && h >= 2 && h < 2 + Nkv;
    };
    auto in_l = [&](std::int64_t b, std::int64_t s, std::int64_t h) { return b == 2 && s >= 1 && s < 1 + S && h < Nq; };
    CHECK(outside_untouched(O, in_q) == 0);
    CHECK(outside_untouched(DQ, in_q) == 0);
    CHECK(outside_untouched(DK, in_k) == 0);
    CHECK(outside_untouched(DV, in_k) == 0);
    CHECK(outside_untouched(L, in_l) == 0);
  }
}

TEST_CASE("positions that are not ascending are refused") {
  const AttentionShape sh{.B = 1, .Sq = 3, .Sk = 3, .Nq = 1, .Nkv = 1, .D = 4};
  AttentionProblem p = attention_problem(sh, true, DType::f64, 1);
  CHECK_THROWS_WITH_AS(p.k_pos = Positions({0, 2, 1}), doctest::Contains("ascending"), Error);
  CHECK_THROWS_WITH_AS(p.k_pos.append(PosRun{1, 2, 1, 1}), doctest::Contains("ascending"), Error);
}

TEST_CASE("at S = 1024 with the default tile the kernel passes the rule in f32 and f64, causal and GQA" *
          doctest::test_suite("slow")) {
  const AttentionShape sh{.B = 1, .Sq = 1024, .Sk = 1024, .Nq = 4, .Nkv = 2, .D = 128};
  for (DType t : {DType::f32, DType::f64}) {
    CAPTURE(dtype_name(t));
    require_passed(tiled_check(attention_problem(sh, true, t, 70), t, CpuDevice::kDefaultTile));
  }
}
