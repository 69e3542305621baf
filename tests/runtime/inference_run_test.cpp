// One inference step end to end (sim/runtime/inference_run.cpp): the report, the JSON and the refusals.
#include <doctest/doctest.h>

#include "sim/comm/backend_registry.hpp"
#include "sim/core/error.hpp"
#include "sim/runtime/inference_run.hpp"

using namespace cpsim;

namespace {
InferenceRunConfig small(InferenceKind k) {
  InferenceRunConfig c;
  c.kind = k;
  c.check = true;
  c.problem.ranks = 4;
  c.problem.new_tokens = 8;
  c.problem.cached = 24;
  return c;
}
}  // namespace

TEST_CASE("an inference run reports every rank's new tokens and bytes, the formula and a passing check") {
  const InferenceRunResult r = run_inference(small(InferenceKind::pass_kv));
  const std::string text = format_inference_report(r);
  CHECK(text.find("pass_kv, C=4 ranks on threads") != std::string::npos);
  CHECK(text.find("   0  24,31 ") != std::string::npos);  // rank 0: chunks 0 and 7 of the 8 new tokens
  CHECK(text.find("Bytes each rank sends, by formula") != std::string::npos);
  CHECK(text.find("PASSED") != std::string::npos);
  const Json j = inference_run_json(r);
  for (const Json& rank : j["ranks"]) CHECK(rank["bytes_sent"].get<std::int64_t>() == j["bytes_per_rank_formula"]);
  CHECK(j["check"]["passed"].get<bool>());
}

TEST_CASE("the out and lse of an inference run are in token order, the same whichever strategy made them") {
  InferenceRunConfig c = small(InferenceKind::pass_kv);
  c.problem.new_tokens = 4;  // decode takes it too
  const InferenceRunResult a = run_inference(c);
  c.kind = InferenceKind::pass_q;
  const InferenceRunResult b = run_inference(c);
  c.kind = InferenceKind::decode;
  const InferenceRunResult d = run_inference(c);
  REQUIRE(a.out.size() == b.out.size());
  for (std::size_t i = 0; i < a.out.size(); ++i) {
    CHECK(a.out[i] == doctest::Approx(b.out[i]).epsilon(1e-12));
    CHECK(a.out[i] == doctest::Approx(d.out[i]).epsilon(1e-12));
  }
}

TEST_CASE("the GPU backends and bf16 on the CPU refuse the inference strategies with a fix") {
  for (Backend be : {Backend::nccl, Backend::cuda_threads}) {
    InferenceRunConfig c = small(InferenceKind::pass_q);
    c.backend = be;
    CHECK_THROWS_AS(check_inference_config(c), UsageError);
    if (find_backend(be))  // built in: refused for the strategy, naming the backends that run it
      CHECK_THROWS_WITH(check_inference_config(c), doctest::Contains("CPU backends (threads, processes, mpi)"));
  }
  InferenceRunConfig c = small(InferenceKind::decode);
  c.problem.dtype = DType::bf16;
  CHECK_THROWS_WITH_AS(check_inference_config(c), doctest::Contains("bf16"), UsageError);
}

TEST_CASE("an inference step this machine cannot hold is refused before anything large is allocated") {
  InferenceRunConfig c = small(InferenceKind::pass_kv);
  c.problem.cached = std::int64_t{1} << 36;  // 2^36 cached tokens: 32 TiB of K/V as doubles
  c.problem.new_tokens = 1024;
  CHECK_THROWS_WITH_AS(run_inference(c), doctest::Contains("of memory, more than"), UsageError);
}
