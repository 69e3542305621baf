// Decode over a sharded cache (sim/strategies/decode.cpp) against the single-process reference.
#include <doctest/doctest.h>

#include "inference_cases.hpp"

using namespace cpsim;
using test::expect_inference_correct;
using test::inference_config;

namespace {
// (T, P): one token after a cache, a few tokens (fewer and more than C), no cache at all.
constexpr std::int64_t kShapes[][2] = {{1, 64}, {1, 37}, {3, 50}, {5, 40}, {2, 0}, {1, 1}};
}  // namespace

TEST_CASE("decode matches the reference in f64 with grouped-query attention and a batch of two") {
  for (int C : {2, 3, 4, 8})
    for (const auto& s : kShapes) expect_inference_correct(inference_config(InferenceKind::decode, C, s[0], s[1]));
}

TEST_CASE("decode matches the reference in f32 by the plain-loops rule") {
  for (int C : {2, 4})
    for (const auto& s : kShapes)
      expect_inference_correct(inference_config(InferenceKind::decode, C, s[0], s[1], DType::f32));
}

TEST_CASE("decode places new tokens round-robin: token j on rank j mod C") {
  const InferenceRunResult r = expect_inference_correct(inference_config(InferenceKind::decode, 4, 6, 20));
  for (const RankReport& rr : r.ranks)
    for (std::int64_t i = 0; i < rr.positions.size(); ++i) CHECK((rr.positions.at(i) - 20) % 4 == rr.rank);
}

TEST_CASE("decode matches the reference on the processes backend") {
  expect_inference_correct(inference_config(InferenceKind::decode, 3, 2, 31, DType::f64, Backend::processes));
}

TEST_CASE("decode under a sliding window matches the reference with the same window") {
  for (int C : {2, 3, 4})
    for (std::int64_t W : {1, 7, 30}) {
      InferenceRunConfig c = inference_config(InferenceKind::decode, C, 3, 40);
      c.problem.window = W;
      expect_inference_correct(c);
    }
}
