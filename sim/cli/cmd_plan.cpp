// cpsim plan: the fastest ways to run one model shape's attention on C ranks of a machine that fit a GPU's memory,
// found by searching every strategy, mesh, sharding and KV replication (sim/model/plan.hpp).
#include <algorithm>
#include <cmath>
#include <iostream>

#include "sim/cli/cli.hpp"
#include "sim/cli/inference_cli.hpp"
#include "sim/cli/model_options.hpp"
#include "sim/cli/model_text.hpp"
#include "sim/core/error.hpp"
#include "sim/core/json.hpp"
#include "sim/core/sizes.hpp"
#include "sim/layout/layout.hpp"
#include "sim/model/frameworks.hpp"
#include "sim/model/plan.hpp"
#include "sim/model/published.hpp"

namespace cpsim::cli {
namespace {

constexpr int kMostRanks = 1024;  // the counting run's limit (model_options.cpp)

std::string gib(std::int64_t bytes) {
  return fixed(static_cast<double>(bytes) / (1 << 30), 1);
}

// A term's difference in ms with its sign: "+1.20", "-0.35".
std::string percent_ms(double us) {
  return (us >= 0 ? "+" : "") + fixed(us / 1e3, 2);
}

std::string ms(double us) {
  return fixed(us / 1e3, 2);
}

// The re-checked fix when nothing fits: the fewest ranks on which something does, or that none does.
std::string ranks_fix(const model::PlanSpec& spec, int most) {
  const int R = model::smallest_fitting_ranks(spec, most);
  if (R > 0) return "--ranks " + std::to_string(R) + " is the fewest on which a candidate fits (re-checked)";
  if (R < 0)
    return "more ranks: none of the first " + std::to_string(model::kMaxRankTries) + " rank counts above " +
           std::to_string(spec.problem.ranks) + " that could fit does (re-checked)";
  return "no --ranks up to " + std::to_string(most) + " fits (re-checked): use fewer tokens (--seq) or fewer layers";
}

// The frameworks run every block from Python (Transformer Engine's ring, which Megatron-LM's p2p runs, and PyTorch's
// context_parallel): on a machine that counts only the strategy code's own costs, plan times their candidates on
// that stack as well (model::with_stack, pytorch), the stack that met MagiAttention's H100 benchmark within 16%.
void print_own_stack_note() {
  std::cout << "  (on its own stack: with --stack pytorch's costs, every block issued from Python as these frameworks "
               "issue them; the pick's time is the strategy code's own. Transformer Engine's ring took "
            << fixed(model::kTransformerEngineRingSlower[0], 2) << "x to "
            << fixed(model::kTransformerEngineRingSlower[1], 2)
            << "x the strategy code's own ring time in MagiAttention's H100 benchmark, and this stack met it within "
               "16%: docs/predictions.md, section 2)\n";
}

void print_text(const model::PlanSpec& spec, const model::Plan& plan, std::size_t top, int most) {
  const Problem& p = spec.problem;
  const model::Machine& m = spec.machine;
  std::cout << "Plan: attention of " << p.heads << " query heads (" << p.kv_heads << " KV) of " << p.head_dim
            << ", S=" << size_label(p.seq) << ", B=" << p.batch << ", " << dtype_name(p.dtype) << ", "
            << (p.causal ? "causal" : "full")
            << (p.docs.any() ? ", " + std::to_string(p.documents().count()) + " documents" : "")
            << (p.window > 0 ? ", window " + std::to_string(p.window) : "") << ", "
            << (spec.backward ? "forward + backward" : "forward") << "\n"
            << "on " << p.ranks << (p.ranks == 1 ? " rank of " : " ranks of ") << m.name << " (" << m.nodes_for(p.ranks)
            << " node(s) of " << m.ranks_per_node << ", " << fixed(m.memory_gb * 1e9 / (1 << 30), 1)
            << " GiB per GPU, sold as " << fixed(m.memory_gb, 0) << " GB)";
  if (spec.layers > 0)
    std::cout << "; activations of " << spec.layers << " layers of hidden size " << spec.hidden << " counted";
  std::cout << "\n"
            << plan.searched << " candidates searched (strategy x mesh x sharding x KV replication), "
            << plan.fits.size() << " fit\n\n";
  bool memory_refused = false;
  for (const auto& r : plan.rejected) memory_refused = memory_refused || r.why.starts_with("needs ");
  if (plan.fits.empty() && !memory_refused) {
    std::cout << "No candidate can run this shape; each one's reason is below\n";
  } else if (plan.fits.empty()) {
    std::cout << "Nothing fits: " << ranks_fix(spec, most)
              << (spec.layers > 0 ? "; activations are counted as kept, without recomputation" : "") << "\n";
  } else {
    const std::size_t n = std::min(top, plan.fits.size());
    std::cout << "The " << n << " fastest that fit (time = compute + memory ops + imbalance + exposed "
              << "communication, ms; memory per GPU: attention buffers" << (spec.layers > 0 ? " + activations" : "")
              << "):\n";
    std::cout << right("#", 3) << "  " << left("candidate", 34) << right("time", 10) << right("compute", 9)
              << right("mem ops", 9) << right("imbal.", 9) << right("exposed", 9) << right("GiB", 7)
              << right("effic.", 8) << "\n";
    for (std::size_t i = 0; i < n; ++i) {
      const model::PlanEntry& e = plan.fits[i];
      std::cout << right(std::to_string(i + 1), 3) << "  " << left(e.candidate.label, 34)
                << right(ms(e.cell.time_us(spec.backward)), 10) << right(ms(e.cell.mean_compute_us), 9)
                << right(ms(e.cell.mean_memory_us), 9) << right(ms(e.cell.imbalance_us), 9)
                << right(ms(e.cell.exposed_us), 9) << right(gib(e.total_bytes()), 7)
                << right(fixed(e.cell.efficiency, 2), 8) << "\n";
    }
    const model::PlanEntry& best = plan.fits.front();
    Problem run = p;
    run.sharding = best.candidate.sharding;
    run.kv_replicate = best.candidate.kv_replicate;
    const model::Nearest near = model::nearest_published(run, m.name, spec.backward, best.candidate.strategy);
    if (plan.fits.size() > 1) {
      const model::PlanEntry& next = plan.fits[1];
      const model::Verdict v = model::verdict(best, next);
      std::cout << "\n";
      if (v.gap_us < 1e-3 * (1 + best.cell.time_us(spec.backward)) && std::fabs(v.compute_us) < 1 &&
          std::fabs(v.exposed_us) < 1)
        std::cout << "A tie: " << best.candidate.label << " and " << next.candidate.label
                  << " take the same time in every term (within 1 us).";
      else if (v.tie)
        std::cout << "A tie: " << best.candidate.label << " and " << next.candidate.label << " are within "
                  << fixed(v.gap * 100, 1) << "% (" << ms(v.gap_us) << " ms), under the " << fixed(model::kTie * 100, 0)
                  << "% the model calls a tie; ";
      else
        std::cout << best.candidate.label << " beats " << next.candidate.label << " by " << fixed(v.gap * 100, 1)
                  << "% (" << ms(v.gap_us) << " ms); ";
      if (!(v.gap_us < 1e-3 * (1 + best.cell.time_us(spec.backward)) && std::fabs(v.compute_us) < 1 &&
            std::fabs(v.exposed_us) < 1))
        std::cout << "the deciding term is " << v.deciding << ", " << ms(v.deciding_us)
                  << " ms more for the runner-up (its differences: compute " << percent_ms(v.compute_us)
                  << ", memory ops " << percent_ms(v.memory_us) << ", imbalance " << percent_ms(v.imbalance_us)
                  << ", exposed " << percent_ms(v.exposed_us) << " ms)";
      if (next.total_bytes() < best.total_bytes())
        std::cout << "; the runner-up needs "
                  << format_bytes(static_cast<double>(best.total_bytes() - next.total_bytes())) << " less memory";
      std::cout << "\n";
      if (!v.tie && v.gap <= std::fabs(near.error))
        std::cout << "The gap is within the model's error at the nearest published point ("
                  << fixed(std::fabs(near.error) * 100, 1) << "%): measure both before choosing.\n";
    }
    std::cout << "Nearest published point the model is checked against: " << near.point->label << " on "
              << near.point->machine << "; this shape: " << near.how_far << "; the model is off by "
              << percent(near.error) << " there.\n";
    std::cout << "\nTo run " << best.candidate.label << ":\n";
    for (const auto& f : model::framework_settings(run, best.candidate.strategy))
      std::cout << "  " << left(f.framework + ":", 26) << (f.runs ? f.settings : "cannot run it: " + f.why_not) << "\n";
    // Each framework's fastest: on its own stack where plan timed one (every framework, said with its time), else
    // where it cannot run the pick (the fastest it can, and what that costs).
    const double t0 = best.cell.time_us(spec.backward);
    bool own_stack = false;
    for (const model::FrameworkPick& pick : model::framework_picks(spec, plan)) {
      if (!pick.entry) {
        std::cout << "  " << pick.setting.framework << " runs none of the " << plan.fits.size()
                  << " candidates that fit: " << pick.setting.why_not << "\n";
        continue;
      }
      if (!pick.own_stack && *pick.entry == 0) continue;
      own_stack = own_stack || pick.own_stack;
      std::cout << "  the fastest " << pick.setting.framework << " can run"
                << (pick.own_stack ? " on its own stack" : "") << ": " << plan.fits[*pick.entry].candidate.label << ", "
                << ms(pick.time_us) << " ms (" << percent(pick.time_us / t0 - 1) << "): " << pick.setting.settings
                << "\n";
    }
    if (own_stack) print_own_stack_note();
  }
  if (!plan.rejected.empty()) {
    std::cout << "\nRejected:\n";
    for (const auto& r : plan.rejected) std::cout << "  " << r.kind << ": " << r.why << " -- " << r.configs << "\n";
  }
}

void print_json(const model::PlanSpec& spec, const model::Plan& plan, std::size_t top, int most) {
  const Problem& p = spec.problem;
  Json fastest = Json::array();
  for (std::size_t i = 0; i < std::min(top, plan.fits.size()); ++i) {
    const model::PlanEntry& e = plan.fits[i];
    Problem run = p;
    run.sharding = e.candidate.sharding;
    run.kv_replicate = e.candidate.kv_replicate;
    Json frameworks = Json::array();
    for (const auto& f : model::framework_settings(run, e.candidate.strategy)) {
      frameworks.push_back({{"framework", f.framework},
                            {"runs", f.runs},
                            {f.runs ? "settings" : "why_not", f.runs ? f.settings : f.why_not}});
    }
    fastest.push_back({{"candidate", e.candidate.label},
                       {"strategy", model::choice_label(e.candidate.strategy, p.ranks)},
                       {"sharding", sharding_name(e.candidate.sharding)},
                       {"kv_replicate", e.candidate.kv_replicate},
                       {"time_ms", e.cell.time_us(spec.backward) / 1e3},
                       {"forward_ms", e.cell.forward_us / 1e3},
                       {"compute_ms", e.cell.mean_compute_us / 1e3},
                       {"memory_ops_ms", e.cell.mean_memory_us / 1e3},
                       {"imbalance_ms", e.cell.imbalance_us / 1e3},
                       {"exposed_ms", e.cell.exposed_us / 1e3},
                       {"attention_bytes", e.cell.peak_bytes},
                       {"activation_bytes", e.activation_bytes},
                       {"memory_bytes", e.total_bytes()},
                       {"efficiency", e.cell.efficiency},
                       {"frameworks", std::move(frameworks)}});
    if (e.framework_cell) fastest.back()["own_stack_time_ms"] = e.framework_cell->time_us(spec.backward) / 1e3;
  }
  Json rejected = Json::array();
  for (const auto& r : plan.rejected) rejected.push_back({{"kind", r.kind}, {"why", r.why}, {"candidates", r.configs}});
  Json j{{"machine", {{"name", spec.machine.name}, {"memory_gb", spec.machine.memory_gb}}},
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
  // Each framework's fastest of every candidate that fits: on its own stack when plan timed one.
  if (spec.framework_machine) j["own_stack_machine"] = spec.framework_machine->name;
  Json picks = Json::array();
  for (const model::FrameworkPick& pick : model::framework_picks(spec, plan))
    if (pick.entry)
      picks.push_back({{"framework", pick.setting.framework},
                       {"candidate", plan.fits[*pick.entry].candidate.label},
                       {"time_ms", pick.time_us / 1e3},
                       {"own_stack", pick.own_stack},
                       {"settings", pick.setting.settings}});
    else  // none of the candidates that fit runs on it
      picks.push_back(
          {{"framework", pick.setting.framework}, {"candidate", nullptr}, {"why_not", pick.setting.why_not}});
  j["framework_fastest"] = std::move(picks);
  if (plan.fits.empty()) {
    const int R = model::smallest_fitting_ranks(spec, most);
    j["fix"] = {{"fewest_ranks_that_fit", R > 0 ? Json(R) : Json(nullptr)}, {"text", ranks_fix(spec, most)}};
  } else {
    Problem run = p;
    run.sharding = plan.fits.front().candidate.sharding;
    run.kv_replicate = plan.fits.front().candidate.kv_replicate;
    const model::Nearest near =
        model::nearest_published(run, spec.machine.name, spec.backward, plan.fits.front().candidate.strategy);
    j["nearest_published"] = {{"point", near.point->label},
                              {"machine", near.point->machine},
                              {"how_far", near.how_far},
                              {"error", near.error}};
    if (plan.fits.size() > 1) {
      const model::Verdict v = model::verdict(plan.fits[0], plan.fits[1]);
      j["verdict"] = {{"gap", v.gap},
                      {"gap_ms", v.gap_us / 1e3},
                      {"tie", v.tie},
                      {"deciding", v.deciding},
                      {"deciding_ms", v.deciding_us / 1e3},
                      {"within_model_error", !v.tie && v.gap <= std::fabs(near.error)}};
    }
  }
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
  spec.machine = model_machine(shape);
  spec.backward = vm.count("forward-only") == 0;
  spec.layers = layers;
  spec.hidden = hidden;
  spec.problem = model_problem(shape, vm, 0, spec.machine);
  // --docs without --seq: S is the documents' sum (padded with --pad-docs), as model_problem set it.
  if (!vm["seq"].defaulted() || spec.problem.docs.lengths.empty()) spec.problem.seq = parse_seq("seq", seq);
  // The frameworks' own stack, where the machine counts only the strategy code's costs (and there is a CP group).
  if (!model::has_stack_costs(spec.machine) && spec.problem.ranks > 1)
    spec.framework_machine = model::with_stack(spec.machine, model::SoftwareStack::pytorch);
  // Shape errors every candidate shares (head counts, a length no layout cuts) are the user's to fix; with
  // --pad-docs under the sharding the padding is for.
  // With documents the shardings differ in what they accept: the shape is refused only when none of plan's takes
  // it, in the words of per-document zigzag (whose fix, --pad-docs, is the one that helps).
  Problem probe = spec.problem;
  probe.sharding = spec.problem.docs.pad ? Sharding::zigzag : Sharding::contiguous;
  if (spec.problem.docs.any() && !spec.problem.docs.pad) {
    bool any = false;
    for (const Sharding sh : model::plan_shardings(spec.problem)) {
      probe.sharding = sh;
      try {
        validate_model_problem(probe, StrategyKind::ring);
        any = true;
        break;
      } catch (const UsageError&) {
      }
    }
    probe.sharding = Sharding::zigzag;
    if (!any) validate_model_problem(probe, StrategyKind::ring);
  } else {
    validate_model_problem(probe, StrategyKind::ring);
  }
  const int most = std::min(
      kMostRanks, spec.machine.max_nodes > 0 ? spec.machine.max_nodes * spec.machine.ranks_per_node : kMostRanks);
  const model::Plan plan = model::plan(spec);
  if (vm.count("json"))
    print_json(spec, plan, static_cast<std::size_t>(top), most);
  else
    print_text(spec, plan, static_cast<std::size_t>(top), most);
  return 0;
}

}  // namespace

CPSIM_COMMAND(plan, "the fastest ways to run a model shape's attention on C ranks that fit a GPU's memory", cmd_plan);

}  // namespace cpsim::cli
