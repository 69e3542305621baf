// Fixes name the flags of the program that prints them: alternatives it lacks are dropped, renamed ones renamed.
#include "sim/core/flags.hpp"

#include <doctest/doctest.h>

using namespace cpsim;

TEST_CASE("with no program registered every flag is offered under its own name") {
  offer_all_flags();
  CHECK(flag("seq") == "--seq");
  CHECK(use({"--seq 16", "--sharding contiguous"}) == "use --seq 16 or --sharding contiguous");
  CHECK(use({"--a", "--b", "--c"}) == "use --a, --b or --c");
  CHECK(use_value("dtype", {"f32", "f64"}) == "use --dtype f32 or f64");
}

TEST_CASE("a program's fixes keep only the alternatives whose every flag it offers, in its spelling") {
  offer_flags({{"seq", "seqs"}, {"seqs", "seqs"}, {"ranks", "ranks"}});
  CHECK(flag("seq") == "--seqs");
  CHECK(flag("strategy").empty());
  CHECK(use({"--seq 16", "--sharding contiguous"}) == "use --seqs 16");
  CHECK(use({"--strategy hybrid --a2a 4", "--ranks 2"}) == "use --ranks 2");
  CHECK(use({"--strategy ring"}, "change the shape") == "change the shape");
  CHECK(use({"a smaller --ranks"}) == "use a smaller --ranks");
  CHECK(use_value("dtype", {"f32"}, "none").compare("none") == 0);
  offer_all_flags();
}

TEST_CASE("words with dashes inside are not flags") {
  offer_flags({{"seq", "seq"}});
  CHECK(use({"--seq 16 (the all-to-all needs it)"}) == "use --seq 16 (the all-to-all needs it)");
  offer_all_flags();
}
