// A program's errors name its own flags: worded() keeps the ways whose flags it offers, renamed, and with no
// program registered says what() says.
#include "sim/cli/flag_names.hpp"

#include <doctest/doctest.h>

#include "sim/comm/launch_support.hpp"

using namespace cpsim;

TEST_CASE("with no program registered every flag is offered under its own name") {
  offer_all_flags();
  CHECK(flag("seq") == "--seq");
  const UsageError e("c", {Fix{{"--seq 16", "--sharding contiguous"}}});
  CHECK(worded(e) == e.what());
}

TEST_CASE("a program's errors keep only the ways whose every flag it offers, in its spelling") {
  offer_flags({{"seq", "seqs"}, {"seqs", "seqs"}, {"ranks", "ranks"}});
  CHECK(flag("seq") == "--seqs");
  CHECK(flag("strategy").empty());
  CHECK(worded(UsageError("c", {Fix{{"--seq 16", "--sharding contiguous"}}})) == "c; use --seqs 16");
  CHECK(worded(UsageError("c", {Fix{{"--dtype f32 or f64"}, "none"}})) == "c; none");
  CHECK(worded(std::runtime_error("plain")) == "plain");
  offer_all_flags();
}

TEST_CASE("a rank's usage error sent as text is worded by the program that launched the rank") {
  offer_flags({{"seq", "seqs"}});
  const UsageError in_rank("S is odd (S=7)", {Fix{{"--seq 8", "--sharding contiguous"}}});
  const RankFailure f = rank_failure(2, encoded(in_rank));
  CHECK(std::string(f.what()) == "rank 2: S is odd (S=7); use --seq 8 or --sharding contiguous");
  CHECK(worded(f) == "rank 2: S is odd (S=7); use --seqs 8");
  CHECK(f.rank == 2);
  offer_all_flags();
}
