// Errors keep their fixes apart as data: what() names every quantity under its own flag, another spelling renames
// them and drops the ways whose flags it lacks, and the parts survive the trip through text to another process.
#include "sim/core/error.hpp"

#include <doctest/doctest.h>

#include <map>

using namespace cpsim;

namespace {

// A program that calls the sequence length --seqs and has --ranks and --memory-limit, nothing else.
std::string bench_spelling(const std::string& q) {
  static const std::map<std::string, std::string> names{{"seq", "seqs"}, {"ranks", "ranks"},
                                                        {"memory-limit", "memory-limit"}};
  const auto it = names.find(q);
  return it == names.end() ? "" : "--" + it->second;
}

}  // namespace

TEST_CASE("what() says the constraint and every way out under its own flag name") {
  const UsageError e("S must be divisible by 2C=8 (S=10)", {Fix{{"--seq 16", "--sharding contiguous"}}});
  CHECK(std::string(e.what()) == "S must be divisible by 2C=8 (S=10); use --seq 16 or --sharding contiguous");
  CHECK(e.constraint() == "S must be divisible by 2C=8 (S=10)");
  CHECK(std::string(UsageError("no fix").what()) == "no fix");
  CHECK(std::string(UsageError("c", {Fix{{"--a", "--b", "--c"}}}).what()) == "c; use --a, --b or --c");
}

TEST_CASE("another spelling renames the quantities and keeps only the ways whose every flag it has") {
  const UsageError e("c", {Fix{{"--seq 16", "--sharding contiguous"}}});
  CHECK(e.worded(bench_spelling) == "c; use --seqs 16");
  CHECK(UsageError("c", {Fix{{"--strategy hybrid --a2a 4", "--ranks 2"}}}).worded(bench_spelling) == "c; use --ranks 2");
  CHECK(UsageError("c", {Fix{{"--strategy ring"}, "change the shape"}}).worded(bench_spelling) ==
        "c; change the shape");
  CHECK(UsageError("c", {Fix{{"--strategy ring"}}}).worded(bench_spelling) == "c");
  CHECK(UsageError("c", {Fix{{"a smaller --ranks"}}}).worded(bench_spelling) == "c; use a smaller --ranks");
  // Words with dashes inside are not flags.
  CHECK(UsageError("c", {Fix{{"--seq 16 (the all-to-all needs it)"}}}).worded(bench_spelling) ==
        "c; use --seqs 16 (the all-to-all needs it)");
}

TEST_CASE("a fix of several parts joins those that say something with their leads, else says its none") {
  const std::vector<Fix> fix{Fix{{"--seq 1024", "--strategy ring"}},
                             Fix{{"drop --check"}, "", ", ", ""},
                             Fix{{"set the limit with --memory-limit BYTES"}, "", ", or ", ""}};
  const UsageError e("too big", fix, "use a smaller shape");
  CHECK(std::string(e.what()) ==
        "too big; use --seq 1024 or --strategy ring, drop --check, or set the limit with --memory-limit BYTES");
  CHECK(e.worded(bench_spelling) == "too big; use --seqs 1024, or set the limit with --memory-limit BYTES");
  CHECK(e.worded([](const std::string&) { return std::string(); }) == "too big; use a smaller shape");
  // A part without ways is a fixed phrase.
  const UsageError pad("c", {Fix{{}, "pad them"}, Fix{{"--sharding balanced"}}});
  CHECK(std::string(pad.what()) == "c; pad them, or use --sharding balanced");
  CHECK(pad.worded(bench_spelling) == "c; pad them");
}

TEST_CASE("a message sent as text to another process reads back with its fixes apart") {
  const UsageError e("S must be even (S=7)", {Fix{{"--seq 8", "--sharding contiguous"}, "change S"}}, "none");
  const auto d = decoded(encoded(e));
  REQUIRE(d.has_value());
  CHECK(d->usage);
  CHECK(UsageError(d->constraint, d->fix, d->none).worded(bench_spelling) == e.worded(bench_spelling));
  CHECK(std::string(UsageError(d->constraint, d->fix, d->none).what()) == e.what());
  const Error plain("rank 1 waited 5.0 s");
  CHECK_FALSE(decoded(encoded(plain))->usage);
  // Any other exception travels as its what(), which is no encoded message.
  const std::runtime_error other("boom");
  CHECK(encoded(other) == "boom");
  CHECK_FALSE(decoded("boom").has_value());
}
