#include <doctest/doctest.h>

#include <limits>
#include <string>
#include <type_traits>

#include "sim/core/error.hpp"
#include "sim/strategies/strategy.hpp"

using namespace cpsim;

namespace {
Problem problem(int C, std::int64_t S, std::int64_t Nq, std::int64_t Nkv) {
  Problem p;
  p.ranks = C;
  p.seq = S;
  p.heads = Nq;
  p.kv_heads = Nkv;
  return p;
}
}  // namespace

TEST_CASE("ulysses refuses heads that do not divide by C and points to --kv-replicate or the hybrid") {
  CHECK_THROWS_WITH_AS(validate(problem(16, 64, 32, 8), StrategyKind::ulysses),
                       doctest::Contains("use --kv-replicate"), UsageError);
  CHECK_THROWS_WITH_AS(validate(problem(4, 64, 6, 6), StrategyKind::ulysses), doctest::Contains("Nq % 4"), UsageError);
  Problem p = problem(16, 64, 32, 8);
  p.kv_replicate = true;
  CHECK_NOTHROW(validate(p, StrategyKind::ulysses));
}

TEST_CASE("the hybrid needs A to divide C") {
  Problem p = problem(8, 64, 8, 8);
  p.a2a = 3;
  CHECK_THROWS_WITH_AS(validate(p, StrategyKind::hybrid), doctest::Contains("A must divide C"), UsageError);
  p.a2a = 4;
  CHECK_NOTHROW(validate(p, StrategyKind::hybrid));
}

TEST_CASE("impossible shapes are refused with the constraint named") {
  CHECK_THROWS_WITH_AS(validate(problem(4, 60, 8, 8), StrategyKind::ring), doctest::Contains("divisible by 2C"),
                       UsageError);
  CHECK_THROWS_WITH_AS(validate(problem(4, 64, 8, 3), StrategyKind::ring), doctest::Contains("Nq % Nkv"), UsageError);
  Problem p = problem(4, 64, 8, 8);
  p.head_dim = 0;
  CHECK_THROWS_AS(validate(p, StrategyKind::ring), UsageError);
  p = problem(4, 64, 8, 8);
  p.kv_replicate = true;
  CHECK_THROWS_WITH_AS(validate(p, StrategyKind::ring), doctest::Contains("all-to-all"), UsageError);
  p = problem(4, 64, 8, 8);
  p.a2a = 2;
  CHECK_THROWS_WITH_AS(validate(p, StrategyKind::ring), doctest::Contains("--a2a"), UsageError);
  CHECK_THROWS_AS(parse_strategy("tree"), UsageError);
}

TEST_CASE("only validation makes a ValidProblem, and each validation is counted") {
  static_assert(!std::is_default_constructible_v<ValidProblem>);
  static_assert(!std::is_constructible_v<ValidProblem, Problem, StrategyKind>);
  const std::int64_t before = validations();
  const ValidProblem v = validated(problem(4, 64, 8, 8), StrategyKind::ring);
  CHECK(v.problem().seq == 64);
  CHECK(v.kind() == StrategyKind::ring);
  CHECK(validations() == before + 1);
  CHECK_THROWS_AS(validated(problem(4, 60, 8, 8), StrategyKind::ring), UsageError);
  CHECK(validations() == before + 2);
}

TEST_CASE("a fix never suggests a value that wraps: S near 2^63 is rounded down to a multiple of 2C") {
  Problem p = problem(3, std::numeric_limits<std::int64_t>::max(), 8, 8);
  std::string message;
  try {
    validate(p, StrategyKind::ring);
  } catch (const UsageError& e) {
    message = e.what();
  }
  CAPTURE(message);
  CHECK(message.find("; use --seq " + std::to_string(std::numeric_limits<std::int64_t>::max() / 6 * 6) +
                     " or --sharding contiguous") != std::string::npos);
  CHECK(message.find("--seq -") == std::string::npos);
}
