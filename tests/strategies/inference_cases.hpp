// Shared helpers for the inference strategy tests: a configuration in one line, and the check every test makes.
#pragma once
#include <doctest/doctest.h>

#include <initializer_list>
#include <string>

#include "sim/runtime/inference_run.hpp"

namespace cpsim::test {

inline InferenceRunConfig inference_config(InferenceKind k, int C, std::int64_t T, std::int64_t P,
                                           DType dtype = DType::f64, Backend be = Backend::threads) {
  InferenceRunConfig c;
  c.kind = k;
  c.backend = be;
  c.check = true;
  c.timeout = std::chrono::seconds(60);
  InferenceProblem& p = c.problem;
  p.ranks = C;
  p.batch = 2;
  p.new_tokens = T;
  p.cached = P;
  p.heads = 8;
  p.kv_heads = 2;  // grouped-query attention
  p.head_dim = 16;
  p.dtype = dtype;
  return c;
}

inline std::string inference_label(const InferenceRunConfig& c) {
  const InferenceProblem& p = c.problem;
  return std::string(inference_name(c.kind)) + " C=" + std::to_string(p.ranks) + " T=" +
         std::to_string(p.new_tokens) + " P=" + std::to_string(p.cached) + " " + std::string(dtype_name(p.dtype)) +
         " " + std::string(backend_name(c.backend));
}

// Runs and checks against the reference: f64 within 1e-10 absolute, f32 by the plain-loops rule (check.hpp).
inline InferenceRunResult expect_inference_correct(const InferenceRunConfig& c) {
  INFO(inference_label(c));
  const InferenceRunResult r = run_inference(c);
  REQUIRE(r.check.ran);
  CHECK(r.check.err.out <= r.check.allowed.out);
  CHECK(r.check.err.lse <= r.check.allowed.lse);
  if (c.problem.dtype == DType::f64) {
    CHECK(r.check.err.out <= 1e-10);
    CHECK(r.check.err.lse <= 1e-10);
  }
  CHECK(r.check.passed);
  return r;
}

// A prefill strategy against the reference at every share of new tokens: (T, P) of one new token, no cache, a few
// shares, sizes 2C does not divide; on each of `ranks`.
inline void expect_prefill_correct_at_every_share(InferenceKind k, std::initializer_list<int> ranks, DType dtype) {
  constexpr std::int64_t kShapes[][2] = {{1, 40}, {16, 0}, {8, 56}, {24, 24}, {5, 37}, {48, 16}};
  for (int C : ranks)
    for (const auto& s : kShapes) expect_inference_correct(inference_config(k, C, s[0], s[1], dtype));
}

// A prefill strategy under sliding windows of 1, 7 and 30 keys, against the reference with the same window.
inline void expect_prefill_correct_under_windows(InferenceKind k) {
  for (int C : {2, 3, 4})
    for (std::int64_t W : {1, 7, 30}) {
      InferenceRunConfig c = inference_config(k, C, 24, 40);
      c.problem.window = W;
      expect_inference_correct(c);
    }
}

}  // namespace cpsim::test
