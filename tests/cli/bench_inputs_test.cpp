// `cpsim bench inputs` end to end, on few samples: what it prints, never how fast it is.
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "run_cli.hpp"

using cpsim::test::count;
using cpsim::test::run_cli;
using cpsim::test::values_after;

TEST_CASE("bench inputs times each dtype beside libm and finds the same bits on every sample") {
  const auto r = run_cli("bench inputs --samples 3000", "bench_inputs_text");
  REQUIRE(r.rc == 0);
  CHECK(r.err.empty());
  CHECK(count(r.out, "seeded inputs: 3000 samples per dtype, one thread, built for ") == 1);
  // A row per dtype: dtype, fast ns, libm ns, speedup, fast ms, and the comparison of every sample's bits.
  std::istringstream lines(r.out);
  std::vector<std::string> dtypes;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream f(line);
    std::string dtype;
    double fast = 0, libm = 0;
    if (!(f >> dtype >> fast >> libm) || (dtype != "f32" && dtype != "bf16" && dtype != "f64")) continue;
    dtypes.push_back(dtype);
    CHECK(fast > 0);
    CHECK(libm > 0);
    CHECK_MESSAGE(line.find(" the same bits") != std::string::npos, line);
  }
  CHECK(dtypes == std::vector<std::string>{"f32", "bf16", "f64"});
}

TEST_CASE("bench inputs --json carries each dtype's times, speedup and differing samples (none)") {
  const auto r = run_cli("bench inputs --samples 3000 --json", "bench_inputs_json");
  REQUIRE(r.rc == 0);
  CHECK(count(r.out, "\"bench\":\"inputs\",\"samples\":3000,\"vector_isa\":\"") == 1);
  CHECK(count(r.out, "\"dtype\":") == 3);
  CHECK(count(r.out, "\"differing\":0") == 3);
  for (double ns : values_after(r.out, "fast_ns_per_sample")) CHECK(ns > 0);
  CHECK(values_after(r.out, "speedup").size() == 3);
}

TEST_CASE("bench inputs refuses a sample count it cannot hold, in one line with a fix") {
  for (const char* n : {"0", "33554433"}) {
    const auto r = run_cli(std::string("bench inputs --samples ") + n, "bench_inputs_refused");
    CAPTURE(n);
    CHECK(r.rc == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find("--samples must be within 1..33554432") != std::string::npos);
    CHECK(r.err.find("use --samples 1572864") != std::string::npos);
    CHECK(cpsim::test::count_lines(r.err) == 1);
  }
}
