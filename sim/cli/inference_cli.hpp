// Inference shapes on the command line: --new-tokens T and --cached P (sizes take K, M, G), which `cpsim run`,
// `cpsim predict` and `cpsim plan` share, and what each prints for such a shape (sim/strategies/inference.hpp,
// sim/model/inference_plan.hpp).
#pragma once
#include <cstdint>

#include "sim/cli/cli.hpp"
#include "sim/cli/model_options.hpp"
#include "sim/cli/problem_options.hpp"

namespace cpsim::cli {

struct InferenceFlags {
  std::int64_t new_tokens = 0, cached = 0;
  int ranks_per_node = 0;  // predict, plan: --ranks-per-node, when given
};

// --new-tokens, --cached; with `model` (predict, plan) also --ranks-per-node.
void add_inference_options(po::options_description& desc, InferenceFlags& f, bool model);
// Whether the command line describes an inference step: --new-tokens given, or an inference --strategy.
bool inference_asked(const po::variables_map& vm, const std::string& strategy);

// cpsim run on an inference shape: the run on C ranks, its per-rank table (bytes, time per token) and --check.
int run_inference_command(const ProblemOptions& o, const InferenceFlags& f, const po::variables_map& vm);
// cpsim predict on an inference shape: pass-KV and pass-Q prefill (time to first token) and decode (time per
// token, by CP degree), modeled.
int predict_inference_command(const ModelShapeOptions& shape, const InferenceFlags& f, const po::variables_map& vm);
// cpsim plan on an inference shape: pass-KV or pass-Q, with the reasons, and decode's time per token.
int plan_inference_command(const ModelShapeOptions& shape, const InferenceFlags& f, const po::variables_map& vm);

}  // namespace cpsim::cli
