// The parsing every command shares (sim/cli/cli.cpp): bare words and sizes that do not fit are refused, each in one
// line with exit code 2, before anything runs.
#include <doctest/doctest.h>

#include "run_cli.hpp"

using cpsim::test::count_lines;
using cpsim::test::run_cli;

TEST_CASE("a bare word after a command is refused, not ignored") {
  for (const char* command : {"run", "predict", "plan", "layout", "bench strategies"}) {
    CAPTURE(command);
    const auto r = run_cli(std::string(command) + " extra", "cli_positional");
    CHECK(r.rc == 2);
    CHECK(r.out.empty());
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find("takes no positional argument (got 'extra')") != std::string::npos);
    CHECK(r.err.find(std::string("cpsim ") + command + " --help") != std::string::npos);
  }
}

TEST_CASE("run and attention take sizes with K, M, G, T suffixes as layout and predict do") {
  const auto run = run_cli("run --seq 1K --batch 2 --json", "cli_suffix");
  CHECK(run.rc == 0);
  CHECK(run.out.find("\"seq\":1024") != std::string::npos);
  CHECK(run.out.find("\"batch\":2") != std::string::npos);
  const auto att = run_cli("attention --seq 1K --heads 2 --json", "cli_suffix");
  CHECK(att.rc == 0);
  CHECK(att.out.find("\"seq\":1024") != std::string::npos);
  for (const char* too_large : {"run --seq 16777216T", "attention --seq 8388608T", "run --heads 99999999999999999999"}) {
    CAPTURE(too_large);
    const auto r = run_cli(too_large, "cli_suffix");
    CHECK(r.rc == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find("is too large") != std::string::npos);
  }
}

TEST_CASE("a size that is negative, too large for 64 bits or overflows with its suffix is refused as such") {
  struct Case {
    const char* value;
    const char* says;
  };
  for (const Case& c : {Case{"-1", "is not a size"}, Case{"' 16K'", "is not a size"},
                        Case{"99999999999999999999", "is too large for a size"},
                        Case{"17179869184G", "is too large for a size"}, Case{"16Q", "has an unknown suffix"}}) {
    CAPTURE(c.value);
    const auto r = run_cli(std::string("predict --seq ") + c.value, "cli_size");
    CHECK(r.rc == 2);
    CHECK(r.out.empty());
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find(c.says) != std::string::npos);
  }
  // A size over int64 is too large for a sequence length, in predict and plan alike; 2^63 - 1 tokens parse, and the
  // model then refuses the shape it would count.
  for (const char* command : {"predict", "plan"}) {
    CAPTURE(command);
    const auto r = run_cli(std::string(command) + " --seq 17179869183G", "cli_size");
    CHECK(r.rc == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find("is too large for a sequence length") != std::string::npos);
  }
  const auto r = run_cli("predict --seq 9223372036854775807", "cli_size");
  CHECK(r.rc == 2);
  CHECK(r.err.find("more than the model counts exactly") != std::string::npos);
}
