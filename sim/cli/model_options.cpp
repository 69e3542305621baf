#include "sim/cli/model_options.hpp"

#include "sim/core/error.hpp"
#include "sim/model/predict.hpp"

namespace cpsim::cli {
namespace {

constexpr int kMaxRanks = 1024;  // one thread each in the counting run

}  // namespace

void add_model_shape_options(po::options_description& desc, ModelShapeOptions& o) {
  static std::string presets;  // the help text must outlive desc
  if (presets.empty()) {
    for (const auto& n : model::machine_preset_names()) presets += n + " | ";
    presets += "FILE.json";
  }
  desc.add_options()                                                                                             //
      ("machine", po::value(&o.machine)->default_value(o.machine), presets.c_str())                              //
      ("ranks,C", po::value(&o.ranks)->default_value(o.ranks), "context-parallel ranks C")                       //
      ("batch,B", po::value(&o.batch)->default_value(o.batch), "batch B")                                        //
      ("heads,N", po::value(&o.heads)->default_value(o.heads), "query heads Nq")                                 //
      ("kv-heads", po::value(&o.kv_heads)->default_value(o.kv_heads), "KV heads Nkv (0: same as --heads; GQA)")  //
      ("head-dim,D", po::value(&o.head_dim)->default_value(o.head_dim), "head dim D")                            //
      ("dtype", po::value(&o.dtype)->default_value(o.dtype), "bf16 | f32 | f64")                                 //
      ("full", "attention without the causal mask")                                                              //
      ("forward-only", "the forward pass only");
}

Problem model_problem(const ModelShapeOptions& o, const po::variables_map& vm, const model::Machine& machine) {
  require(o.ranks >= 1 && o.ranks <= kMaxRanks,
          "--ranks must be between 1 and " + std::to_string(kMaxRanks) + " (got " + std::to_string(o.ranks) + ")",
          "use --ranks 8");
  model::check_fits(machine, o.ranks);
  Problem p;
  p.ranks = o.ranks;
  p.batch = o.batch;
  p.heads = o.heads;
  p.kv_heads = o.kv_heads == 0 ? o.heads : o.kv_heads;
  p.head_dim = o.head_dim;
  p.dtype = parse_dtype(o.dtype);
  p.causal = vm.count("full") == 0;
  return p;
}

void validate_model_problem(const Problem& p, StrategyKind kind) {
  model::check_model_shape(p);
  try {
    validate(p, kind);
  } catch (const UsageError& e) {
    throw UsageError(model::in_predict_terms(e.what()));
  }
}

}  // namespace cpsim::cli
