// Pass-Q prefill (sim/strategies/prefill_pass_q.cpp) against the single-process reference.
#include <doctest/doctest.h>

#include "inference_cases.hpp"

using namespace cpsim;
using test::expect_inference_correct;
using test::inference_config;

namespace {
// (T, P): one new token, no cache, a few shares of new tokens, sizes 2C does not divide.
constexpr std::int64_t kShapes[][2] = {{1, 40}, {16, 0}, {8, 56}, {24, 24}, {5, 37}, {48, 16}};
}  // namespace

TEST_CASE("pass-Q prefill matches the reference in f64 with grouped-query attention at every share of new tokens") {
  for (int C : {2, 3, 4, 8})
    for (const auto& s : kShapes) expect_inference_correct(inference_config(InferenceKind::pass_q, C, s[0], s[1]));
}

TEST_CASE("pass-Q prefill matches the reference in f32 by the plain-loops rule") {
  for (int C : {2, 4})
    for (const auto& s : kShapes)
      expect_inference_correct(inference_config(InferenceKind::pass_q, C, s[0], s[1], DType::f32));
}

TEST_CASE("pass-Q prefill on one rank is one block and matches the reference") {
  expect_inference_correct(inference_config(InferenceKind::pass_q, 1, 8, 24));
}

TEST_CASE("pass-Q prefill matches the reference on the processes backend") {
  expect_inference_correct(inference_config(InferenceKind::pass_q, 3, 7, 29, DType::f64, Backend::processes));
}

TEST_CASE("pass-Q prefill under a sliding window matches the reference with the same window") {
  for (int C : {2, 3, 4})
    for (std::int64_t W : {1, 7, 30}) {
      InferenceRunConfig c = inference_config(InferenceKind::pass_q, C, 24, 40);
      c.problem.window = W;
      expect_inference_correct(c);
    }
}
