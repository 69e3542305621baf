// Pass-Q prefill (sim/strategies/prefill_pass_q.cpp) against the single-process reference.
#include <doctest/doctest.h>

#include "inference_cases.hpp"

using namespace cpsim;
using test::expect_inference_correct;
using test::inference_config;

TEST_CASE("pass-Q prefill matches the reference in f64 with grouped-query attention at every share of new tokens") {
  test::expect_prefill_correct_at_every_share(InferenceKind::pass_q, {2, 3, 4, 8}, DType::f64);
}

TEST_CASE("pass-Q prefill matches the reference in f32 by the plain-loops rule") {
  test::expect_prefill_correct_at_every_share(InferenceKind::pass_q, {2, 4}, DType::f32);
}

TEST_CASE("pass-Q prefill on one rank is one block and matches the reference") {
  expect_inference_correct(inference_config(InferenceKind::pass_q, 1, 8, 24));
}

TEST_CASE("pass-Q prefill matches the reference on the processes backend") {
  expect_inference_correct(inference_config(InferenceKind::pass_q, 3, 7, 29, DType::f64, Backend::processes));
}

TEST_CASE("pass-Q prefill under a sliding window matches the reference with the same window") {
  test::expect_prefill_correct_under_windows(InferenceKind::pass_q);
}
