// The reference: its definition on cases worked by hand, its backward against finite differences, GQA, empty rows.
#include "sim/kernels/reference.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "sim/core/error.hpp"
#include "sim/core/random.hpp"

using namespace cpsim;

TEST_CASE("a query that sees one key gets that key's value and lse = scale q.k") {
  // B=1, S=2, one head, D=2; causal: row 0 sees key 0 only.
  const AttentionShape sh{.B = 1, .Sq = 2, .Sk = 2, .Nq = 1, .Nkv = 1, .D = 2};
  const std::vector<double> q{1, 2, 3, 4}, k{0.5, -1, 2, 0.25}, v{10, 20, 30, 40};
  const auto f = reference_forward(q, k, v, sh, iota_positions(0, 2), iota_positions(0, 2), true);
  const double scale = 1 / std::sqrt(2.0);
  CHECK(f.out[0] == 10);
  CHECK(f.out[1] == 20);
  CHECK(f.lse[0] == doctest::Approx(scale * (1 * 0.5 + 2 * -1)).epsilon(1e-15));
  // row 1 sees both keys: softmax weights of s = scale q1.k_j
  const double s0 = scale * (3 * 0.5 + 4 * -1), s1 = scale * (3 * 2 + 4 * 0.25);
  const double w0 = std::exp(s0) / (std::exp(s0) + std::exp(s1));
  CHECK(f.out[2] == doctest::Approx(w0 * 10 + (1 - w0) * 30).epsilon(1e-14));
  CHECK(f.out[3] == doctest::Approx(w0 * 20 + (1 - w0) * 40).epsilon(1e-14));
  CHECK(f.lse[1] == doctest::Approx(std::log(std::exp(s0) + std::exp(s1))).epsilon(1e-14));
}

TEST_CASE("a row that sees no key gets zero output, -inf lse and zero gradients, never NaN") {
  const AttentionShape sh{.B = 1, .Sq = 3, .Sk = 2, .Nq = 1, .Nkv = 1, .D = 2};
  const auto q = normals(1, 0, 6), k = normals(1, 1, 4), v = normals(1, 2, 4), dout = normals(1, 3, 6);
  const Positions q_pos{0, 1, 5}, k_pos{2, 3};  // rows 0 and 1 come before every key
  const auto f = reference_forward(q, k, v, sh, q_pos, k_pos, true);
  const auto g = reference_backward(q, k, v, dout, sh, q_pos, k_pos, true);
  for (int i : {0, 1}) {
    CHECK(f.lse[i] == -std::numeric_limits<double>::infinity());
    CHECK(f.out[2 * i] == 0);
    CHECK(f.out[2 * i + 1] == 0);
    CHECK(g.dq[2 * i] == 0);
    CHECK(g.dq[2 * i + 1] == 0);
  }
  CHECK(std::isfinite(f.lse[2]));
  for (double x : g.dk) CHECK(std::isfinite(x));
}

TEST_CASE("the reference backward matches central finite differences of sum(out * dout) in f64") {
  const AttentionShape sh{.B = 2, .Sq = 4, .Sk = 5, .Nq = 4, .Nkv = 2, .D = 3};
  const Positions q_pos{1, 2, 4, 6}, k_pos{0, 1, 3, 4, 6};  // rows see 2, 3, 4 and 5 keys
  auto q = normals(5, 0, 2 * 4 * 4 * 3), k = normals(5, 1, 2 * 5 * 2 * 3), v = normals(5, 2, 2 * 5 * 2 * 3);
  const auto dout = normals(5, 3, q.size());
  auto loss = [&] {
    const auto f = reference_forward(q, k, v, sh, q_pos, k_pos, true);
    double l = 0;
    for (std::size_t i = 0; i < f.out.size(); ++i) l += f.out[i] * dout[i];
    return l;
  };
  const auto g = reference_backward(q, k, v, dout, sh, q_pos, k_pos, true);
  const double h = 1e-6;
  auto check_grad = [&](std::vector<double>& x, const std::vector<double>& grad, const char* name) {
    double worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double x0 = x[i];
      x[i] = x0 + h;
      const double up = loss();
      x[i] = x0 - h;
      const double down = loss();
      x[i] = x0;
      worst = std::max(worst, std::abs((up - down) / (2 * h) - grad[i]));  // (L(x+h) - L(x-h)) / 2h
    }
    INFO(name, " worst difference ", worst);
    CHECK(worst < 1e-8);
  };
  check_grad(q, g.dq, "dq");
  check_grad(k, g.dk, "dk");
  check_grad(v, g.dv, "dv");
}

TEST_CASE("query head h reads kv head h / (Nq / Nkv): GQA equals attention on replicated kv heads") {
  const std::int64_t B = 1, S = 6, Nq = 4, Nkv = 2, D = 3;
  const AttentionShape gqa{.B = B, .Sq = S, .Sk = S, .Nq = Nq, .Nkv = Nkv, .D = D};
  const AttentionShape mha{.B = B, .Sq = S, .Sk = S, .Nq = Nq, .Nkv = Nq, .D = D};
  const auto q = normals(9, 0, B * S * Nq * D), k = normals(9, 1, B * S * Nkv * D), v = normals(9, 2, B * S * Nkv * D);
  const auto dout = normals(9, 3, q.size());
  auto replicate = [&](const std::vector<double>& x) {  // [B, S, Nkv, D] -> [B, S, Nq, D], head h = kv head h / 2
    std::vector<double> r(B * S * Nq * D);
    for (std::int64_t s = 0; s < S; ++s)
      for (std::int64_t h = 0; h < Nq; ++h)
        for (std::int64_t d = 0; d < D; ++d) r[(s * Nq + h) * D + d] = x[(s * Nkv + h / (Nq / Nkv)) * D + d];
    return r;
  };
  const auto pos = iota_positions(0, S);
  const auto a = reference_forward(q, k, v, gqa, pos, pos, true);
  const auto b = reference_forward(q, replicate(k), replicate(v), mha, pos, pos, true);
  CHECK(a.out == b.out);
  CHECK(a.lse == b.lse);
  // The gradient of a shared kv head is the sum over the query heads that read it.
  const auto ga = reference_backward(q, k, v, dout, gqa, pos, pos, true);
  const auto gb = reference_backward(q, replicate(k), replicate(v), dout, mha, pos, pos, true);
  for (std::int64_t s = 0; s < S; ++s)
    for (std::int64_t g = 0; g < Nkv; ++g)
      for (std::int64_t d = 0; d < D; ++d) {
        const double sum = gb.dk[(s * Nq + 2 * g) * D + d] + gb.dk[(s * Nq + 2 * g + 1) * D + d];
        CHECK(ga.dk[(s * Nkv + g) * D + d] == doctest::Approx(sum).epsilon(1e-13));
      }
}

TEST_CASE("full attention equals causal attention when every key precedes every query") {
  const AttentionShape sh{.B = 1, .Sq = 3, .Sk = 4, .Nq = 2, .Nkv = 1, .D = 4};
  const auto q = normals(2, 0, 24), k = normals(2, 1, 16), v = normals(2, 2, 16);
  const Positions q_pos{10, 11, 12}, k_pos{0, 1, 2, 3};
  const auto full = reference_forward(q, k, v, sh, q_pos, k_pos, false);
  const auto causal = reference_forward(q, k, v, sh, q_pos, k_pos, true);
  CHECK(full.out == causal.out);
  CHECK(full.lse == causal.lse);
}

TEST_CASE("inputs that disagree with the shape are refused with an Error naming the tensor") {
  const AttentionShape sh{.B = 1, .Sq = 2, .Sk = 2, .Nq = 2, .Nkv = 1, .D = 2};
  const std::vector<double> q(8), kv(4);
  const auto pos = iota_positions(0, 2);
  CHECK_THROWS_WITH_AS(reference_forward(std::vector<double>(7), kv, kv, sh, pos, pos, true),
                       doctest::Contains("q has 7 values"), Error);
  CHECK_THROWS_AS(reference_forward(q, kv, kv, sh, pos, iota_positions(0, 3), true), Error);
  AttentionShape bad = sh;
  bad.Nkv = 3;
  CHECK_THROWS_WITH_AS(reference_forward(q, kv, kv, bad, pos, pos, true), doctest::Contains("multiple"), Error);
}
