#include "sim/cli/model_options.hpp"

#include <limits>

#include <regex>

#include "sim/cli/flag_names.hpp"
#include "sim/core/error.hpp"
#include "sim/model/predict.hpp"

namespace cpsim::cli {
namespace {

constexpr int kMaxRanks = 1024;  // one thread each in the counting run

}  // namespace

constexpr unsigned kShapeFlags =
    kFlagRanks | kFlagBatch | kFlagHeads | kFlagKvHeads | kFlagHeadDim | kFlagDtype | kFlagFull | kFlagsMask;

void add_model_shape_options(po::options_description& desc, ModelShapeOptions& o, unsigned more) {
  static std::string presets;  // the help text must outlive desc
  if (presets.empty()) {
    for (const auto& n : model::machine_preset_names()) presets += n + " | ";
    presets += "FILE.json";
  }
  desc.add_options()("machine", po::value(&o.machine)->default_value(o.machine), presets.c_str())(
      "stack", po::value(&o.stack),
      "fused | pytorch: the software stack's costs (fused: the strategy code's own; pytorch: every block issued "
      "from Python, as Megatron-LM, Transformer Engine and ring-flash-attention do); default: the machine's own")(
      "forward-only", "the forward pass only");
  add_problem_options(desc, o.shape, kShapeFlags | more);
}

model::Machine model_machine(const ModelShapeOptions& o) {
  model::Machine m = model::load_machine(o.machine);
  if (o.stack.empty()) return m;
  require(o.stack == "fused" || o.stack == "pytorch",
          "--stack must be fused or pytorch (the software stack that runs the strategies), not '" + o.stack + "'",
          "use --stack pytorch for Megatron-LM, Transformer Engine or ring-flash-attention, --stack fused for the "
          "strategy code's own costs");
  return model::with_stack(m, o.stack == "pytorch" ? model::SoftwareStack::pytorch : model::SoftwareStack::fused);
}

std::int64_t parse_seq(const std::string& flag, const std::string& text) {
  const std::size_t n = parse_size(flag, text);
  require(n <= static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max()),
          "--" + flag + " '" + text + "' is too large for a sequence length (at most 2^63 - 1 tokens)",
          "use --" + flag + " 1M");
  return static_cast<std::int64_t>(n);
}

Problem model_problem(const ModelShapeOptions& o, const po::variables_map& vm, unsigned more,
                      const model::Machine& machine) {
  require(o.shape.ranks >= 1 && o.shape.ranks <= kMaxRanks,
          "--ranks must be between 1 and " + std::to_string(kMaxRanks) + " (got " + std::to_string(o.shape.ranks) + ")",
          "use --ranks 8");
  model::check_fits(machine, o.shape.ranks);
  RunConfig config;
  apply_problem_options(o.shape, vm, kShapeFlags | more, config);
  return config.problem;
}

std::string in_predict_terms(const UsageError& e) {
  static const std::vector<std::pair<std::regex, std::string>> rules = {
      {std::regex("--strategy hybrid --a2a ([0-9A-Za-z]+)"), "--strategies hybrid:$1"},
      {std::regex("an --a2a that divides"), "a hybrid:A whose A divides"},
      {std::regex("--a2a 1 or a divisor of C"), "--strategies hybrid:A with A dividing C"},
      {std::regex("--a2a ([0-9]+)"), "--strategies hybrid:$1"},
      {std::regex("--strategy "), "--strategies "},
  };
  std::string s = worded(e);
  for (const auto& [from, to] : rules) s = std::regex_replace(s, from, to);
  return s;
}

void validate_model_problem(const Problem& p, StrategyKind kind) {
  model::check_model_shape(p);
  try {
    validate(p, kind);
  } catch (const UsageError& e) {
    throw UsageError(in_predict_terms(e));
  }
}

}  // namespace cpsim::cli
