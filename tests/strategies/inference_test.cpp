// The inference strategies' names, validation and bytes per rank (sim/strategies/inference.cpp).
#include <doctest/doctest.h>

#include "inference_cases.hpp"
#include "sim/core/error.hpp"

using namespace cpsim;
using test::inference_config;

namespace {
// Every rank's bytes sent, as its Recorder counted them.
std::vector<std::int64_t> sent(const InferenceRunResult& r) {
  std::vector<std::int64_t> b;
  for (const RankReport& rr : r.ranks) b.push_back(rr.stats.comm_counts().bytes_sent);
  return b;
}
}  // namespace

TEST_CASE("the inference strategies are found by name, and training names are not theirs") {
  for (InferenceKind k : all_inference()) CHECK(find_inference(inference_name(k)) == k);
  CHECK(find_inference("pass-q") == InferenceKind::pass_q);
  CHECK(find_inference("pass-kv") == InferenceKind::pass_kv);
  CHECK_FALSE(find_inference("ring").has_value());
  CHECK(is_prefill(InferenceKind::pass_q));
  CHECK_FALSE(is_prefill(InferenceKind::decode));
}

TEST_CASE("an inference problem with no new token, a negative cache or Nq not a multiple of Nkv is refused") {
  InferenceProblem p;
  p.new_tokens = 0;
  CHECK_THROWS_WITH_AS(validate(p, InferenceKind::pass_kv), doctest::Contains("at least one new token"), UsageError);
  p.new_tokens = 4;
  p.cached = -1;
  CHECK_THROWS_AS(validate(p, InferenceKind::pass_q), UsageError);
  p.cached = 8;
  p.heads = 6;
  p.kv_heads = 4;
  CHECK_THROWS_WITH_AS(validate(p, InferenceKind::decode), doctest::Contains("Nq % Nkv"), UsageError);
  p.heads = 8;
  p.new_tokens = 65;
  CHECK_THROWS_WITH_AS(validate(p, InferenceKind::decode), doctest::Contains("decode"), UsageError);
  CHECK_NOTHROW(validate(p, InferenceKind::pass_q));
  // B Nq (T P + T(T+1)/2) past 2^63 - 1: the Recorders could not count the pairs.
  p.kv_heads = 1;
  p.head_dim = 1;
  p.new_tokens = std::int64_t{1} << 25;
  p.cached = std::int64_t{1} << 36;
  CHECK_THROWS_WITH_AS(validate(p, InferenceKind::pass_kv), doctest::Contains("overflow 64 bits"), UsageError);
}

TEST_CASE("pass-KV sends (C-1)/C of the K/V of all T+P tokens per rank, by formula") {
  for (int C : {2, 3, 4, 8}) {
    const std::int64_t T = 4 * C, P = 6 * C;  // 2C divides both: every shard alike
    const InferenceRunConfig c = inference_config(InferenceKind::pass_kv, C, T, P);
    const InferenceProblem& p = c.problem;
    const std::int64_t e = 8, kv = (C - 1) * 2 * p.batch * ((T + P) / C) * p.kv_heads * p.head_dim * e;
    CHECK(inference_bytes(p, c.kind).total() == kv);
    for (std::int64_t b : sent(run_inference(c))) CHECK(b == kv);
  }
}

TEST_CASE("pass-Q sends (C-1)/C of the Q of the T new tokens and their partial outputs per rank, by formula") {
  for (int C : {2, 3, 4, 8}) {
    const std::int64_t T = 4 * C, P = 6 * C;
    const InferenceRunConfig c = inference_config(InferenceKind::pass_q, C, T, P);
    const InferenceProblem& p = c.problem;
    const std::int64_t e = 8, rows = (C - 1) * p.batch * (T / C);
    const std::int64_t q = rows * p.heads * p.head_dim * e, partials = rows * p.heads * (p.head_dim + 1) * e;
    CHECK(inference_bytes(p, c.kind).q == q);
    CHECK(inference_bytes(p, c.kind).partials == partials);
    for (std::int64_t b : sent(run_inference(c))) CHECK(b == q + partials);
  }
}

TEST_CASE("decode sends each rank's new Q to every other rank and the partials home, by formula") {
  for (int C : {2, 3, 4, 8}) {
    const std::int64_t T = C, P = 5 * C;  // one new token per rank
    const InferenceRunConfig c = inference_config(InferenceKind::decode, C, T, P);
    const InferenceProblem& p = c.problem;
    const std::int64_t e = 8, rows = (C - 1) * p.batch;
    const std::int64_t expected = rows * p.heads * p.head_dim * e + rows * p.heads * (p.head_dim + 1) * e;
    CHECK(inference_bytes(p, c.kind).total() == expected);
    for (std::int64_t b : sent(run_inference(c))) CHECK(b == expected);
  }
}

TEST_CASE("uneven shards travel padded to the largest, and the formula counts the padding") {
  for (InferenceKind k : all_inference()) {
    const InferenceRunConfig c = inference_config(k, 3, k == InferenceKind::decode ? 4 : 7, 29);
    const std::int64_t expected = inference_bytes(c.problem, k).total();
    CHECK(expected > 0);
    for (std::int64_t b : sent(run_inference(c))) CHECK(b == expected);
  }
}
