// The options `cpsim predict` and `cpsim plan` share: the machine, C, and the attention shape (bf16 and 64 heads of
// 128 unless given, the blog post's shape), read into a Problem with the checks both need.
#pragma once
#include <cstdint>
#include <string>

#include "sim/cli/cli.hpp"
#include "sim/model/machine.hpp"
#include "sim/strategies/strategy.hpp"

namespace cpsim::cli {

struct ModelShapeOptions {
  std::string machine = "h100-sxm-8", dtype = "bf16";
  int ranks = 8;
  std::int64_t batch = 1, heads = 64, kv_heads = 0, head_dim = 128;
};

// --machine, --ranks/-C, --batch/-B, --heads/-N, --kv-heads, --head-dim/-D, --dtype, --full, --forward-only.
void add_model_shape_options(po::options_description& desc, ModelShapeOptions& o);
// The problem (seq left to the caller), after checking C against the counting run's limit and the machine's nodes.
Problem model_problem(const ModelShapeOptions& o, const po::variables_map& vm, const model::Machine& machine);
// validate() with its fixes in the words of predict's and plan's flags.
void validate_model_problem(const Problem& p, StrategyKind kind);

}  // namespace cpsim::cli
