#include "sim/kernels/check.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>

#include "sim/core/error.hpp"
#include "sim/core/json.hpp"
#include "sim/kernels/plain.hpp"

namespace cpsim {

CheckRule check_rule(DType dtype, bool gpu, bool gqa) {
  if (gpu) {
    if (dtype == DType::bf16) {
      const double t = gqa ? 3.5e-2 : 2.5e-2;
      const std::string s = gqa ? "3.5e-2" : "2.5e-2";
      return {RuleKind::elementwise, t, t,
              "bf16: |err| <= " + s + " + " + s + " x |reference| per element (Transformer Engine's CP tests" +
                  (gqa ? ", GQA)" : ")")};
    }
    if (dtype == DType::f32)
      return {RuleKind::elementwise, 1e-5, 1e-4, "f32: |err| <= 1e-5 + 1e-4 x |reference| per element"};
    throw UsageError("GPU runs are checked in bf16 or f32 (got " + std::string(dtype_name(dtype)) + ")",
                     {Fix{{"--dtype bf16 or f32"}}});
  }
  if (dtype == DType::f64) return {RuleKind::absolute, kF64Tolerance, 0, "f64: every max abs error <= 1e-10"};
  if (dtype == DType::f32)
    return {RuleKind::plain_f32, 0, 0,
            "f32: error <= 2 x the plain f32 loops' error + FLT_EPSILON x (max|reference| + 0.3) + each LSE "
            "merge's rounding"};
  throw UsageError("results can be checked in f32 or f64 only (got " + std::string(dtype_name(dtype)) + ")",
                   {Fix{{"--dtype f32 or f64"}}});
}

double max_abs_error(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size())
    throw Error("cannot compare results of " + std::to_string(got.size()) + " and " + std::to_string(want.size()) +
                " values");
  double m = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double a = got[i], b = want[i];
    if (std::isinf(a) && a == b) continue;  // both -inf (a row that sees no key), or both +inf
    const double e = std::abs(a - b);       // NaN when either is NaN
    if (std::isnan(e)) return INFINITY;
    m = std::max(m, e);
  }
  return m;
}

double max_abs_finite(const std::vector<double>& x) {
  double m = 0;
  for (double e : x)
    if (std::isfinite(e)) m = std::max(m, std::abs(e));
  return m;
}

namespace {

struct Bound {
  double atol = 0, rtol = 0;
};

// The comparison of some elements of one tensor.
struct Compared {
  double err = 0;    // max |e - w|
  double worst = 0;  // max |e - w| / (atol + rtol |w|), above 1 exactly when an element is outside its bound

  void add(double e, double w, Bound b) {
    if (std::isinf(e) && e == w) return;  // equal infinities: no error
    const double d = std::abs(e - w);
    if (!std::isfinite(d)) {  // NaN, or an infinity against anything else
      err = worst = INFINITY;
      return;
    }
    const double bound = b.atol + b.rtol * std::abs(w);
    const double ratio = bound > 0 ? d / bound : (d > 0 ? INFINITY : 0);
    err = std::max(err, d);
    worst = std::max(worst, d > bound ? std::max(ratio, std::nextafter(1.0, 2.0)) : std::min(ratio, 1.0));
  }
  // Elements [first, last) of got and want.
  void add(const std::vector<double>& got, const std::vector<double>& want, Bound b, std::size_t first,
           std::size_t last) {
    for (std::size_t i = first; i < last; ++i) add(got[i], want[i], b);
  }
};

Compared compare(const std::vector<double>& got, const std::vector<double>& want, Bound b) {
  if (got.size() != want.size())
    throw Error("cannot compare results of " + std::to_string(got.size()) + " and " + std::to_string(want.size()) +
                " values");
  Compared c;
  c.add(got, want, b, 0, got.size());
  return c;
}

// One tensor: the result, its reference and its bound.
struct Tensor {
  const std::vector<double>* got;
  const std::vector<double>* want;
  Bound bound;
  double* err;
  double* allowed;
  double* worst;
  std::int64_t rows;     // sequence rows of the [B, rows, E] tensor
  bool per_rank = true;  // part of the per-rank verdicts (out, dq, dk, dv; not the [B, N, S] lse)
};

// The rank's max error and verdict over its rows of every per-rank tensor.
RankVerdict rank_verdict(const std::vector<Tensor>& tensors, const std::vector<Span>& spans, std::int64_t batch) {
  Compared all;
  for (const Tensor& t : tensors) {
    if (!t.per_rank) continue;
    const auto row = static_cast<std::int64_t>(t.want->size()) / (batch * t.rows);  // elements per row
    for (std::int64_t b = 0; b < batch; ++b)
      for (const Span& sp : spans)
        all.add(*t.got, *t.want, t.bound, static_cast<std::size_t>((b * t.rows + sp.lo) * row),
                static_cast<std::size_t>((b * t.rows + sp.hi) * row));
  }
  return RankVerdict{all.err, all.worst <= 1.0};
}

// Zeroes the padding rows of a [B, rows, E] tensor (the comparison then sees equal values there).
void clear_rows(std::vector<double>& t, std::int64_t batch, std::int64_t rows, const std::vector<Span>& spans) {
  if (t.empty()) return;
  const auto row = static_cast<std::int64_t>(t.size()) / (batch * rows);
  for (std::int64_t b = 0; b < batch; ++b)
    for (const Span& sp : spans)
      std::fill(t.begin() + (b * rows + sp.lo) * row, t.begin() + (b * rows + sp.hi) * row, 0.0);
}

// The same for a [B, N, S] log-sum-exp.
void clear_lse(std::vector<double>& t, std::int64_t batch, std::int64_t heads, std::int64_t rows,
               const std::vector<Span>& spans) {
  if (t.empty()) return;
  for (std::int64_t bh = 0; bh < batch * heads; ++bh)
    for (const Span& sp : spans) std::fill(t.begin() + bh * rows + sp.lo, t.begin() + bh * rows + sp.hi, 0.0);
}

void clear_padding(RefForward& f, RefBackward* b, const AttentionShape& s, const std::vector<Span>& pad) {
  clear_rows(f.out, s.B, s.Sq, pad);
  clear_lse(f.lse, s.B, s.Nq, s.Sq, pad);
  if (b == nullptr) return;
  clear_rows(b->dq, s.B, s.Sq, pad);
  clear_rows(b->dk, s.B, s.Sk, pad);
  clear_rows(b->dv, s.B, s.Sk, pad);
}

}  // namespace

TensorCheck check_tensor(const std::vector<double>& got, const std::vector<double>& want, const CheckRule& rule) {
  if (rule.kind == RuleKind::plain_f32)
    throw Error("the f32 rule takes its bounds from the whole problem; use check_against_reference");
  const Compared k = compare(got, want, Bound{rule.atol, rule.rtol});
  return TensorCheck{k.err, rule.atol + rule.rtol * max_abs_finite(want), k.worst, k.worst <= 1.0};
}

bool within(double got, double want, const CheckRule& rule) {
  if (rule.kind == RuleKind::plain_f32)
    throw Error("the f32 rule takes its bounds from the whole problem; use check_against_reference");
  Compared k;
  k.add(got, want, Bound{rule.atol, rule.rtol});
  return k.worst <= 1.0;
}

CheckReport check_against_reference(const AttentionProblem& p, const CheckRule& rule, const RefForward& got_f,
                                    const RefBackward* got_b, const std::vector<std::vector<Span>>* owners) {
  CheckReport c;
  c.ran = true;
  c.backward = got_b != nullptr;
  c.kind = rule.kind;
  c.rule = rule.words;
  RefForward ref_f = reference_forward(p.q, p.k, p.v, p.shape, p.q_pos, p.k_pos, p.mask, p.scale);
  RefBackward ref_b;
  if (c.backward) ref_b = reference_backward(p.q, p.k, p.v, p.dout, p.shape, p.q_pos, p.k_pos, p.mask, p.scale);
  // Padding rows are compared as equal zeros: their values are nobody's result.
  RefForward got_f_kept;
  RefBackward got_b_kept;
  const RefForward* gf = &got_f;
  const RefBackward* gb = got_b;
  if (!p.padding.empty()) {
    clear_padding(ref_f, c.backward ? &ref_b : nullptr, p.shape, p.padding);
    got_f_kept = got_f;
    if (got_b) got_b_kept = *got_b;
    clear_padding(got_f_kept, got_b ? &got_b_kept : nullptr, p.shape, p.padding);
    gf = &got_f_kept;
    gb = got_b ? &got_b_kept : nullptr;
  }

  // 1. Each tensor's bound.
  const Bound fixed{rule.atol, rule.rtol};
  Bound b_out = fixed, b_lse = fixed, b_dq = fixed, b_dk = fixed, b_dv = fixed;
  if (rule.kind == RuleKind::plain_f32) {
    // atol = 2 err(plain f32) + FLT_EPSILON (max|reference| + 0.3) + m merge(reference)   (check.hpp)
    const double m = std::max(0, p.merges), L = max_abs_finite(ref_f.lse);
    auto from_plain = [&](const std::vector<double>& plain, const std::vector<double>& ref, double& baseline,
                          double per_merge) {
      baseline = max_abs_error(plain, ref);
      return Bound{2 * baseline + FLT_EPSILON * (max_abs_finite(ref) + kF32FloorOffset) + m * per_merge, 0};
    };
    RefForward pf = plain_forward_f32(p.q, p.k, p.v, p.shape, p.q_pos, p.k_pos, p.mask, p.scale);
    clear_padding(pf, nullptr, p.shape, p.padding);
    b_out = from_plain(pf.out, ref_f.out, c.baseline.out, FLT_EPSILON * max_abs_finite(ref_f.out) * (L + 4));
    b_lse = from_plain(pf.lse, ref_f.lse, c.baseline.lse, FLT_EPSILON * (L + 1));
    if (c.backward) {
      RefBackward pb = plain_backward_f32(p.q, p.k, p.v, p.dout, p.shape, p.q_pos, p.k_pos, p.mask, p.scale);
      RefForward unused;
      clear_padding(unused, &pb, p.shape, p.padding);
      b_dq = from_plain(pb.dq, ref_b.dq, c.baseline.dq, FLT_EPSILON * max_abs_finite(ref_b.dq) * (L + 2));
      b_dk = from_plain(pb.dk, ref_b.dk, c.baseline.dk, FLT_EPSILON * max_abs_finite(ref_b.dk) * (L + 2));
      b_dv = from_plain(pb.dv, ref_b.dv, c.baseline.dv, FLT_EPSILON * max_abs_finite(ref_b.dv) * (L + 2));
    }
  }

  // 2. Every element of every tensor against its bound.
  const AttentionShape& s = p.shape;
  std::vector<Tensor> tensors{{&gf->out, &ref_f.out, b_out, &c.err.out, &c.allowed.out, &c.worst.out, s.Sq},
                              {&gf->lse, &ref_f.lse, b_lse, &c.err.lse, &c.allowed.lse, &c.worst.lse, s.Sq, false}};
  if (c.backward) {
    tensors.push_back({&gb->dq, &ref_b.dq, b_dq, &c.err.dq, &c.allowed.dq, &c.worst.dq, s.Sq});
    tensors.push_back({&gb->dk, &ref_b.dk, b_dk, &c.err.dk, &c.allowed.dk, &c.worst.dk, s.Sk});
    tensors.push_back({&gb->dv, &ref_b.dv, b_dv, &c.err.dv, &c.allowed.dv, &c.worst.dv, s.Sk});
  }
  c.passed = true;
  for (const Tensor& t : tensors) {
    const Compared k = compare(*t.got, *t.want, t.bound);
    *t.err = k.err;
    *t.worst = k.worst;
    *t.allowed = t.bound.atol + t.bound.rtol * max_abs_finite(*t.want);
    c.passed = c.passed && k.worst <= 1.0;
  }

  // 3. Per rank, on the rows it owns.
  if (owners)
    for (const std::vector<Span>& spans : *owners) c.per_rank.push_back(rank_verdict(tensors, spans, s.B));
  return c;
}

Json check_json(const CheckReport& c) {
  auto errs = [&](const TensorErrors& e) {
    Json o{{"out", e.out}, {"lse", e.lse}};
    if (c.backward) {
      o["dq"] = e.dq;
      o["dk"] = e.dk;
      o["dv"] = e.dv;
    }
    return o;
  };
  Json j{{"passed", c.passed}, {"rule", c.rule}, {"max_abs_err", errs(c.err)}, {"tolerance", errs(c.allowed)}};
  if (c.kind == RuleKind::plain_f32) j["plain_f32_err"] = errs(c.baseline);
  Json& ranks = j["per_rank"] = Json::array();
  for (const RankVerdict& v : c.per_rank) ranks.push_back({{"correct", v.correct}, {"max_abs_err", v.err}});
  return j;
}

}  // namespace cpsim
