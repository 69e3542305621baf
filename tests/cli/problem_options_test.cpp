// The problem flags: one table, offered whole by `cpsim run` and in part by the lessons, with one --kv-heads rule.
#include "sim/cli/problem_options.hpp"

#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "sim/core/error.hpp"

using namespace cpsim;
using namespace cpsim::cli;

namespace {

// Parses args against the flags of `flags`, shown with config's values as defaults, and applies them to config.
RunConfig parsed(RunConfig config, unsigned flags, const std::vector<std::string>& args) {
  ProblemOptions o = problem_options(config);
  po::options_description desc;
  add_problem_options(desc, o, flags);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(desc).run(), vm);
  po::notify(vm);
  apply_problem_options(o, vm, flags, config);
  return config;
}

constexpr unsigned kLessonShape = kFlagRanks | kFlagSeq | kFlagHeads | kFlagKvHeads | kFlagHeadDim | kFlagBatch;

}  // namespace

TEST_CASE("a subset of the table offers only its flags") {
  ProblemOptions o;
  po::options_description desc;
  add_problem_options(desc, o, kFlagSeq | kFlagHeads);
  CHECK(desc.find_nothrow("seq", false) != nullptr);
  CHECK(desc.find_nothrow("heads", false) != nullptr);
  CHECK(desc.find_nothrow("strategy", false) == nullptr);
  CHECK(desc.find_nothrow("kv-heads", false) == nullptr);
  po::options_description all;
  add_problem_options(all, o);
  CHECK(all.options().size() == 22);
}

TEST_CASE("--kv-heads: 0 follows --heads, whether given or shown as the default") {
  RunConfig mha;  // defaults without grouped-query attention: Nq = Nkv = 4
  CHECK(problem_options(mha).kv_heads == 0);
  CHECK(parsed(mha, kLessonShape, {"--heads", "8"}).problem.kv_heads == 8);
  CHECK(parsed(mha, kLessonShape, {"--heads", "8", "--kv-heads", "2"}).problem.kv_heads == 2);
  CHECK(parsed(mha, kLessonShape, {"--heads", "8", "--kv-heads", "0"}).problem.kv_heads == 8);
  CHECK(parsed(mha, kFlagHeads, {"--heads", "6"}).problem.kv_heads == 6);  // without the --kv-heads flag too
  RunConfig gqa;                                                           // grouped defaults: Nq = 32, Nkv = 8
  gqa.problem.heads = 32;
  gqa.problem.kv_heads = 8;
  CHECK(problem_options(gqa).kv_heads == 8);
  CHECK(parsed(gqa, kLessonShape, {"--heads", "64"}).problem.kv_heads == 8);
  CHECK(parsed(gqa, kLessonShape, {}).problem.kv_heads == 8);
}

TEST_CASE("a subset changes only its own fields of the configuration") {
  RunConfig c;
  c.strategy = StrategyKind::ulysses;
  c.backward = true;
  c.problem.dtype = DType::f32;
  c.problem.causal = false;
  c.seed = 9;
  const RunConfig r = parsed(c, kLessonShape | kFlagBackend, {"--seq", "128", "-C", "2", "--backend", "processes"});
  CHECK(r.problem.seq == 128);
  CHECK(r.problem.ranks == 2);
  CHECK(r.backend == Backend::processes);
  CHECK(r.strategy == StrategyKind::ulysses);
  CHECK(r.backward);
  CHECK(r.problem.dtype == DType::f32);
  CHECK_FALSE(r.problem.causal);
  CHECK(r.seed == 9);
}

TEST_CASE("every size flag of the table takes the K, M, G, T suffixes (powers of 1024), as layout and predict do") {
  const RunConfig r = parsed(RunConfig{}, kAllProblemFlags,
                             {"--seq", "4K", "--batch", "2", "--heads", "1k", "--kv-heads", "1K", "--head-dim", "128",
                              "--window", "1M", "--chunk", "2G"});
  CHECK(r.problem.seq == 4096);
  CHECK(r.problem.batch == 2);
  CHECK(r.problem.heads == 1024);
  CHECK(r.problem.kv_heads == 1024);
  CHECK(r.problem.head_dim == 128);
  CHECK(r.problem.window == 1024 * 1024);
  CHECK(r.problem.chunk == std::int64_t{2} << 30);
  CHECK(parsed(RunConfig{}, kLessonShape, {"-S", "1T"}).problem.seq == std::int64_t{1} << 40);
  // Past int64 (even through its suffix) is too large; a sign or a fraction is no size.
  CHECK_THROWS_WITH_AS(parsed(RunConfig{}, kLessonShape, {"--seq", "8388608T"}),
                       doctest::Contains("--seq '8388608T' is too large (at most 9223372036854775807)"), UsageError);
  CHECK_THROWS_WITH_AS(parsed(RunConfig{}, kLessonShape, {"--batch", "99999999999999999999"}),
                       doctest::Contains("is too large for a size"), UsageError);
  CHECK_THROWS_WITH_AS(parsed(RunConfig{}, kLessonShape, {"--heads", "-4"}), doctest::Contains("is not a size"),
                       UsageError);
  CHECK_THROWS_WITH_AS(parsed(RunConfig{}, kLessonShape, {"--head-dim", "1.5"}),
                       doctest::Contains("is not a whole number"), UsageError);
  // The help says so, and shows the default as a number.
  ProblemOptions o;
  po::options_description desc;
  add_problem_options(desc, o, kFlagSeq);
  std::ostringstream help;
  help << desc;
  CHECK(help.str().find("(=64)") != std::string::npos);
  CHECK(help.str().find("K, M, G, T: powers of 1024") != std::string::npos);
}

TEST_CASE("the whole table builds the validated configuration of cpsim run") {
  ProblemOptions o;
  po::options_description desc;
  add_problem_options(desc, o);
  po::variables_map vm;
  po::store(po::command_line_parser(std::vector<std::string>{"--strategy", "hybrid", "--ranks", "8", "--a2a", "4",
                                                             "--heads", "8", "--backward", "--full"})
                .options(desc)
                .run(),
            vm);
  po::notify(vm);
  const RunConfig c = to_run_config(o, vm).first;
  CHECK(c.strategy == StrategyKind::hybrid);
  CHECK(c.problem.a2a == 4);
  CHECK(c.problem.kv_heads == 8);
  CHECK(c.backward);
  CHECK_FALSE(c.problem.causal);
  o.a2a = -1;
  CHECK_THROWS_WITH_AS(to_run_config(o, vm), doctest::Contains("--a2a must be a positive A2A group size"), UsageError);
  o.a2a = 0;  // given as 0 on the command line (not the default's "pick"): refused, not run as A = 1
  CHECK_THROWS_WITH_AS(to_run_config(o, vm), doctest::Contains("(got 0)"), UsageError);
}

TEST_CASE("--kernel becomes the run's device setting, and a device that offers no choice refuses one but auto") {
  CHECK(problem_options(RunConfig{}).kernel == "auto");
  CHECK(parsed(RunConfig{}, kFlagKernel, {"--kernel", "mma1"}).device.kernel == "mma1");
  CHECK(parsed(RunConfig{}, kLessonShape, {}).device.kernel == "auto");  // a lesson without the flag keeps auto
  ProblemOptions o;
  po::options_description desc;
  add_problem_options(desc, o);
  po::variables_map vm;
  po::store(po::command_line_parser(std::vector<std::string>{"--kernel", "mma2"}).options(desc).run(), vm);
  po::notify(vm);
  CHECK_THROWS_WITH_AS(to_run_config(o, vm), doctest::Contains("the cpu device of --backend threads has no choice"),
                       UsageError);
}
