// The shape and strategy flags shared by `cpsim run`, `cpsim bench strategies` and the lessons.
#pragma once
#include <string>

#include "sim/cli/cli.hpp"
#include "sim/runtime/run.hpp"

namespace cpsim::cli {

struct ProblemOptions {
  std::string strategy = "ring", sharding = "zigzag", dtype = "f64", backend = "threads", kernel = "auto";
  int ranks = 4, a2a = 0;
  std::int64_t batch = 1, seq = 64, heads = 4, kv_heads = 0, head_dim = 16;
  std::uint64_t seed = 1;
  double timeout_s = 120;
};

void add_problem_options(po::options_description& desc, ProblemOptions& o);
// Builds the validated run configuration (UsageError for impossible combinations).
RunConfig to_run_config(const ProblemOptions& o, const po::variables_map& vm);

}  // namespace cpsim::cli
