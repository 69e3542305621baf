// The options `cpsim predict` and `cpsim plan` share: the machine, the forward-only switch, and the shape flags of
// the one problem-flag table (problem_options.hpp) with the model's defaults (8 ranks, bf16, 64 heads of 128: the
// blog post's shape), read into a Problem with the checks both need.
#pragma once
#include <cstdint>
#include <string>

#include "sim/cli/cli.hpp"
#include "sim/cli/problem_options.hpp"
#include "sim/model/machine.hpp"
#include "sim/model/predict.hpp"
#include "sim/runtime/run.hpp"
#include "sim/strategies/strategy.hpp"

namespace cpsim::cli {

struct ModelShapeOptions {
  std::string machine = "h100-sxm-8";
  std::string stack;  // --stack: fused | pytorch; empty: the machine's own framework costs
  ProblemOptions shape = [] {
    ProblemOptions o;
    o.ranks = 8;
    o.dtype = "bf16";
    o.heads = 64;
    o.head_dim = 128;
    return o;
  }();
};

// --machine, --stack, --forward-only, and of the problem flags --ranks, --batch, --heads, --kv-heads, --head-dim,
// --dtype, --full and the ones in `more` (predict adds --sharding and --kv-replicate).
void add_model_shape_options(po::options_description& desc, ModelShapeOptions& o, unsigned more = 0);
// The machine --machine names, with the framework costs of --stack when given (UsageError for another stack).
model::Machine model_machine(const ModelShapeOptions& o);
// The problem (seq left to the caller), after checking C against the counting run's limit and the machine's nodes.
Problem model_problem(const ModelShapeOptions& o, const po::variables_map& vm, unsigned more,
                      const model::Machine& machine);
// A sequence length (`--seq 16K`), one that does not fit in an int64 refused as too large (exit 2).
std::int64_t parse_seq(const std::string& flag, const std::string& text);
// A validation message in the words of `cpsim predict` and `cpsim plan`, whose flags differ from `cpsim run`'s:
// worded in the program's flags, then "--strategy hybrid --a2a 4" becomes "--strategies hybrid:4", "--strategy
// ring" "--strategies ring".
std::string in_predict_terms(const UsageError& e);
// validate() with its fixes in the words of predict's and plan's flags.
void validate_model_problem(const Problem& p, StrategyKind kind);

// One modeled run as a RunResult (cmd_predict.cpp), so the trace writer and the visualizer take it like a measured
// one: the unchanged strategy code counted, then replayed on the machine with its events on modeled time.
RunResult modeled_run(const Problem& base, const model::StrategyChoice& c, const model::Machine& m, bool backward);

}  // namespace cpsim::cli
