// cpsim plan: the fastest ways to run one model shape's attention on C ranks of a machine that fit a GPU's memory,
// found by searching every strategy, mesh, sharding and KV replication (sim/model/plan.hpp).
#include <iostream>

#include "sim/cli/cli.hpp"
#include "sim/cli/inference_cli.hpp"
#include "sim/cli/model_options.hpp"
#include "sim/cli/model_text.hpp"
#include "sim/core/error.hpp"
#include "sim/core/json.hpp"
#include "sim/layout/layout.hpp"
#include "sim/model/plan.hpp"

namespace cpsim::cli {
namespace {

std::string gib(std::int64_t bytes) {
  return fixed(static_cast<double>(bytes) / (1 << 30), 1);
}

void print_text(const model::PlanSpec& spec, const model::Plan& plan, std::size_t top) {
  const Problem& p = spec.problem;
  const model::Machine& m = spec.machine;
  std::cout << "Plan: attention of " << p.heads << " query heads (" << p.kv_heads << " KV) of " << p.head_dim
            << ", S=" << size_label(p.seq) << ", B=" << p.batch << ", " << dtype_name(p.dtype) << ", "
            << (p.causal ? "causal" : "full") << ", " << (spec.backward ? "forward + backward" : "forward") << "\n"
            << "on " << p.ranks << " ranks of " << m.name << " (" << m.nodes_for(p.ranks) << " node(s) of "
            << m.ranks_per_node << ", " << fixed(m.memory_gb * 1e9 / (1 << 30), 1) << " GiB per GPU, sold as "
            << fixed(m.memory_gb, 0) << " GB)";
  if (spec.layers > 0)
    std::cout << "; activations of " << spec.layers << " layers of hidden size " << spec.hidden << " counted";
  std::cout << "\n"
            << plan.searched << " candidates searched (strategy x mesh x sharding x KV replication), "
            << plan.fits.size() << " fit\n\n";
  if (plan.fits.empty()) {
    std::cout << "Nothing fits: use more ranks (--ranks " << p.ranks * 2 << "), fewer tokens (--seq), or fewer "
              << "layers (activations are counted as kept, without recomputation)\n";
  } else {
    const std::size_t n = std::min(top, plan.fits.size());
    std::cout << "The " << n << " fastest that fit (memory per GPU: attention buffers"
              << (spec.layers > 0 ? " + activations" : "") << "):\n";
    std::cout << right("#", 3) << "  " << left("candidate", 34) << right("time ms", 11) << right("wait ms", 12)
              << right("memory GiB", 11) << right("efficiency", 12) << "\n";
    for (std::size_t i = 0; i < n; ++i) {
      const model::PlanEntry& e = plan.fits[i];
      std::cout << right(std::to_string(i + 1), 3) << "  " << left(e.candidate.label, 34)
                << right(fixed(e.cell.time_us(spec.backward) / 1e3, 2), 11) << right(fixed(e.cell.exposed_us / 1e3, 2), 12)
                << right(gib(e.total_bytes()), 11) << right(fixed(e.cell.efficiency, 2), 12) << "\n";
    }
  }
  if (!plan.rejected.empty()) {
    std::cout << "\nRejected:\n";
    for (const auto& r : plan.rejected) std::cout << "  " << r.kind << ": " << r.why << " -- " << r.configs << "\n";
  }
}

void print_json(const model::PlanSpec& spec, const model::Plan& plan, std::size_t top) {
  const Problem& p = spec.problem;
  Json fastest = Json::array();
  for (std::size_t i = 0; i < std::min(top, plan.fits.size()); ++i) {
    const model::PlanEntry& e = plan.fits[i];
    fastest.push_back({{"candidate", e.candidate.label},
                       {"strategy", model::choice_label(e.candidate.strategy, p.ranks)},
                       {"sharding", sharding_name(e.candidate.sharding)},
                       {"kv_replicate", e.candidate.kv_replicate},
                       {"time_ms", e.cell.time_us(spec.backward) / 1e3},
                       {"forward_ms", e.cell.forward_us / 1e3},
                       {"exposed_ms", e.cell.exposed_us / 1e3},
                       {"attention_bytes", e.cell.peak_bytes},
                       {"activation_bytes", e.activation_bytes},
                       {"memory_bytes", e.total_bytes()},
                       {"efficiency", e.cell.efficiency}});
  }
  Json rejected = Json::array();
  for (const auto& r : plan.rejected) rejected.push_back({{"kind", r.kind}, {"why", r.why}, {"candidates", r.configs}});
  const Json j{{"machine", {{"name", spec.machine.name}, {"memory_gb", spec.machine.memory_gb}}},
               {"problem",
                {{"ranks", p.ranks},
                 {"batch", p.batch},
                 {"seq", p.seq},
                 {"heads", p.heads},
                 {"kv_heads", p.kv_heads},
                 {"head_dim", p.head_dim},
                 {"dtype", dtype_name(p.dtype)},
                 {"causal", p.causal},
                 {"backward", spec.backward},
                 {"layers", spec.layers},
                 {"hidden", spec.hidden}}},
               {"searched", plan.searched},
               {"fits", static_cast<std::int64_t>(plan.fits.size())},
               {"fastest", std::move(fastest)},
               {"rejected", std::move(rejected)}};
  std::cout << json_text(j) << "\n";
}

int cmd_plan(const std::vector<std::string>& args) {
  po::options_description desc(
      "cpsim plan: the fastest strategies, meshes and shardings for a model shape that fit a GPU's memory");
  std::string seq = "128K";
  int layers = 0, top = 5;
  std::int64_t hidden = 0;
  ModelShapeOptions shape;
  shape.shape.heads = 32;
  add_model_shape_options(desc, shape);
  InferenceFlags inference;
  add_inference_options(desc, inference, true);
  desc.add_options()                                                                           //
      ("seq,S", po::value(&seq)->default_value(seq), "sequence length (K, M = 1024, 1024^2)")  //
      ("layers", po::value(&layers)->default_value(layers),
       "transformer layers whose activations also fill the GPU (with --hidden)")                        //
      ("hidden", po::value(&hidden)->default_value(hidden), "the model's hidden size (with --layers)")  //
      ("top", po::value(&top)->default_value(top), "how many of the fastest to list")                   //
      ("json", "print one JSON object");
  po::variables_map vm;
  if (!parse("plan", desc, args, vm)) return 0;
  if (inference_asked(vm, "")) return plan_inference_command(shape, inference, vm);  // inference_cli.hpp
  require(layers >= 0 && hidden >= 0, "--layers and --hidden count something, so they cannot be negative",
          "use --layers 32 --hidden 4096");
  require((layers > 0) == (hidden > 0), "activations need both the layer count and the hidden size",
          "give --layers and --hidden together (e.g. --layers 32 --hidden 4096)");
  require(top >= 1, "--top must be at least 1 (got " + std::to_string(top) + ")", "use --top 5");
  model::PlanSpec spec;
  spec.machine = model::load_machine(shape.machine);
  spec.backward = vm.count("forward-only") == 0;
  spec.layers = layers;
  spec.hidden = hidden;
  spec.problem = model_problem(shape, vm, 0, spec.machine);
  spec.problem.seq = parse_seq("seq", seq);
  // Shape errors every candidate shares (head counts, a length no layout cuts) are the user's to fix.
  Problem probe = spec.problem;
  probe.sharding = Sharding::contiguous;
  validate_model_problem(probe, StrategyKind::ring);
  const model::Plan plan = model::plan(spec);
  if (vm.count("json"))
    print_json(spec, plan, static_cast<std::size_t>(top));
  else
    print_text(spec, plan, static_cast<std::size_t>(top));
  return 0;
}

}  // namespace

CPSIM_COMMAND(plan, "the fastest ways to run a model shape's attention on C ranks that fit a GPU's memory", cmd_plan);

}  // namespace cpsim::cli
