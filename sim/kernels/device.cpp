#include "sim/kernels/device.hpp"

#include <cmath>

#include "sim/core/error.hpp"
#include "sim/kernels/view_checks.hpp"

namespace cpsim {

void check_attention_args(const View& q, const Positions& q_pos, const View& k, const View& v,
                          const Positions& k_pos, const View& out, const View& lse) {
  auto fail = [](const std::string& m) { throw Error("attention: " + m); };
  if (q_pos.size() != q.ns) fail("q_pos has a different count than q's rows");
  if (k_pos.size() != k.ns) fail("k_pos has a different count than k's rows");
  if (!k.same_extent(v)) fail("k and v differ in extent");
  if (q.nb != k.nb || q.d() != k.d()) fail("q and k differ in batch or head dim");
  if (k.nh == 0 || q.nh % k.nh != 0) fail("query heads must be a multiple of kv heads");
  if (!out.same_extent(q)) fail("out must have q's extent");
  if (lse.buf.layout() != Layout::bns || lse.nb != q.nb || lse.ns != q.ns || lse.nh != q.nh)
    fail("lse must be a [B, Nq, sq] view matching q");
  check_consecutive({&q, &k, &v, &out, &lse}, "attention");
}

namespace {
// Useful flops per visible (query, key) pair and head: forward S = QK^T (2D) and O = PV (2D);
// backward recomputes S (2D) and forms dV (2D), dP (2D), dQ (2D), dK (2D).
constexpr double kForwardFlopsPerPairDim = 4.0;
constexpr double kBackwardFlopsPerPairDim = 10.0;

// The events of a trace carry the block's positions; untraced, the counters need none (a striped rank's positions
// are one run, but thousands of spans).
std::vector<Span> spans_if_traced(const Positions& p, const Recorder& rec) { return rec.tracing() ? p.spans() : std::vector<Span>{}; }

BlockKind derive_kind(std::int64_t pairs, std::int64_t all) {
  if (pairs == 0) return BlockKind::skipped;
  if (pairs == all) return BlockKind::full;
  return BlockKind::diagonal;
}
}  // namespace

WorkCounts Device::attention_forward(const View& q, const Positions& q_pos, const View& k, const View& v,
                                     const Positions& k_pos, const View& out, const View& lse,
                                     const AttentionOptions& opt) {
  check_attention_args(q, q_pos, k, v, k_pos, out, lse);
  const double t0 = rec_.now_us();
  const std::int64_t pairs1 = visible_pairs(q_pos, k_pos, opt.mask);
  const double scale = opt.scale > 0 ? opt.scale : 1.0 / std::sqrt(static_cast<double>(q.d()));
  WorkCounts w;
  if (pairs1 == 0) {
    fill(out, 0.0);
    fill(lse, -INFINITY);
    w.skipped_calls = 1;
  } else {
    const TileCounts t = do_attention_forward(q, q_pos, k, v, k_pos, out, lse, opt.mask, scale);
    w.calls = 1;
    w.tiles_computed = t.computed;
    w.tiles_skipped = t.skipped;
    w.pairs = pairs1 * q.nb * q.nh;
    w.flops = kForwardFlopsPerPairDim * static_cast<double>(q.d()) * static_cast<double>(w.pairs);
  }
  const BlockKind kind = opt.kind && pairs1 > 0 ? *opt.kind : derive_kind(pairs1, q.ns * k.ns);
  rec_.work(w, kind, spans_if_traced(q_pos, rec_), spans_if_traced(k_pos, rec_), t0, rec_.now_us() - t0, "attention_forward");
  return w;
}

WorkCounts Device::attention_backward(const View& q, const Positions& q_pos, const View& k, const View& v,
                                      const Positions& k_pos, const View& out, const View& lse, const View& dout,
                                      const View& dq, const View& dk, const View& dv, const AttentionOptions& opt) {
  check_attention_args(q, q_pos, k, v, k_pos, out, lse);
  if (!dout.same_extent(q) || !dq.same_extent(q) || !dk.same_extent(k) || !dv.same_extent(v))
    throw Error("attention backward: gradient views must match q (dout, dq) and k/v (dk, dv)");
  const double t0 = rec_.now_us();
  const std::int64_t pairs1 = visible_pairs(q_pos, k_pos, opt.mask);
  const double scale = opt.scale > 0 ? opt.scale : 1.0 / std::sqrt(static_cast<double>(q.d()));
  WorkCounts w;
  if (pairs1 == 0) {
    w.skipped_calls = 1;
  } else {
    const TileCounts t =
        do_attention_backward(q, q_pos, k, v, k_pos, out, lse, dout, dq, dk, dv, opt.mask, scale);
    w.calls = 1;
    w.tiles_computed = t.computed;
    w.tiles_skipped = t.skipped;
    w.pairs = pairs1 * q.nb * q.nh;
    w.flops = kBackwardFlopsPerPairDim * static_cast<double>(q.d()) * static_cast<double>(w.pairs);
  }
  const BlockKind kind = opt.kind && pairs1 > 0 ? *opt.kind : derive_kind(pairs1, q.ns * k.ns);
  rec_.work(w, kind, spans_if_traced(q_pos, rec_), spans_if_traced(k_pos, rec_), t0, rec_.now_us() - t0, "attention_backward");
  return w;
}

void Device::record_skip(const Positions& q_pos, const Positions& k_pos, const char* phase_call) {
  WorkCounts w;
  w.skipped_calls = 1;
  const double t = rec_.now_us();
  rec_.work(w, BlockKind::skipped, spans_if_traced(q_pos, rec_), spans_if_traced(k_pos, rec_), t, 0.0, phase_call);
}

}  // namespace cpsim
