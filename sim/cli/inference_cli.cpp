#include "sim/cli/inference_cli.hpp"

#include <algorithm>
#include <initializer_list>
#include <iostream>

#include "sim/cli/model_text.hpp"
#include "sim/core/error.hpp"
#include "sim/core/json.hpp"
#include "sim/core/sizes.hpp"
#include "sim/model/inference_plan.hpp"
#include "sim/os/output_file.hpp"
#include "sim/runtime/inference_run.hpp"
#include "sim/runtime/trace.hpp"

namespace cpsim::cli {

namespace {

// Flags an inference step has no use for: refused when given rather than ignored.
void refuse_given(const po::variables_map& vm, std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (vm.count(name) && !vm[name].defaulted())
      throw UsageError("--" + std::string(name) +
                           " does not apply to an inference step (forward only, causal from the cache, its own "
                           "sharding)",
                       {Fix{{}, "drop --" + std::string(name)}});
}

InferenceProblem inference_problem(const Problem& p, const InferenceFlags& f) {
  InferenceProblem q;
  q.batch = p.batch;
  q.heads = p.heads;
  q.kv_heads = p.kv_heads;
  q.head_dim = p.head_dim;
  q.dtype = p.dtype;
  q.ranks = p.ranks;
  q.new_tokens = f.new_tokens;
  q.cached = f.cached;
  q.window = p.window;
  return q;
}

std::string ms(double us) { return fixed(us / 1e3, 3); }

std::string shape_line(const InferenceProblem& p, const model::Machine& m) {
  return "T=" + size_label(p.new_tokens) + (p.new_tokens == 1 ? " new token" : " new tokens") + " after P=" + size_label(p.cached) + " cached (T/(T+P) = " +
         fixed(100.0 * static_cast<double>(p.new_tokens) / static_cast<double>(p.seq()), 2) + "%), B=" +
         std::to_string(p.batch) + ", Nq=" + std::to_string(p.heads) + " Nkv=" + std::to_string(p.kv_heads) +
         " D=" + std::to_string(p.head_dim) + " " + std::string(dtype_name(p.dtype)) + ", C=" +
         std::to_string(p.ranks) + " ranks of " + m.name + " (" + std::to_string(m.nodes_for(p.ranks)) +
         " node(s) of " + std::to_string(m.ranks_per_node) + ")";
}

// Decode's modeled time per token at C = 1, 2, 4, ... up to the problem's C.
std::vector<std::pair<int, model::InferenceTime>> decode_by_ranks(InferenceProblem p, const model::Machine& m) {
  std::vector<std::pair<int, model::InferenceTime>> rows;
  const int C = p.ranks;
  for (int c = 1; c <= C; c *= 2) {
    p.ranks = c;
    rows.emplace_back(c, model::model_inference(p, InferenceKind::decode, m));
    if (c < C && c * 2 > C) {  // C not a power of two: end with C itself
      p.ranks = C;
      rows.emplace_back(C, model::model_inference(p, InferenceKind::decode, m));
    }
  }
  return rows;
}

constexpr std::int64_t kDecodeMost = 64;  // decode is offered up to this many new tokens (inference.cpp)

model::Machine inference_machine(const ModelShapeOptions& shape, const InferenceFlags& f, const po::variables_map& vm) {
  model::Machine m = model_machine(shape);
  return vm.count("ranks-per-node") ? model::with_ranks_per_node(m, f.ranks_per_node) : m;
}

}  // namespace

void add_inference_options(po::options_description& desc, InferenceFlags& f, bool model) {
  desc.add_options()("new-tokens", size_value("new-tokens", &f.new_tokens),
                     size_help("an inference step: new tokens per sequence, after the cache").c_str())(
      "cached", size_value("cached", &f.cached), size_help("an inference step: tokens already in the KV cache").c_str());
  if (model)
    desc.add_options()("ranks-per-node", po::value(&f.ranks_per_node),
                       "ranks of the CP group per node (1: one per node, tensor parallelism filling each node)");
}

bool inference_asked(const po::variables_map& vm, const std::string& strategy) {
  return vm.count("new-tokens") > 0 || vm.count("cached") > 0 || find_inference(strategy).has_value();
}

int run_inference_command(const ProblemOptions& o, const InferenceFlags& f, const po::variables_map& vm) {
  // No --strategy: an inference step runs pass-KV, the ring of training with the cache's K/V on it.
  const bool chosen = vm.count("strategy") > 0 && !vm["strategy"].defaulted();
  const std::optional<InferenceKind> kind = chosen ? find_inference(o.strategy) : InferenceKind::pass_kv;
  if (!kind)
    throw UsageError("--new-tokens and --cached describe an inference step, which --strategy " + o.strategy +
                         " does not run",
                     {Fix{{"--strategy pass_kv, pass_q or decode"}}});
  require(vm.count("new-tokens") > 0,
          "the inference strategy " + std::string(inference_name(*kind)) + " needs the step's new tokens",
          Fix{{"--new-tokens 16 --cached 48"}});
  refuse_given(vm, {"backward", "seq", "sharding", "a2a", "kv-replicate", "full", "docs", "pad-docs", "chunk",
                    "kernel", "dump", "bench-json", "compare", "memory-limit"});
  const std::string trace = vm.count("trace") ? vm["trace"].as<std::string>() : "",
                    html = vm.count("html") ? vm["html"].as<std::string>() : "";
  check_output("trace", trace);
  check_output("html", html);
  if (!html.empty()) visualizer_dir();  // the page's files must be there before the run starts
  RunConfig base;
  apply_problem_options(o, vm,
                        kFlagRanks | kFlagBatch | kFlagHeads | kFlagKvHeads | kFlagHeadDim | kFlagDtype | kFlagBackend |
                            kFlagSeed | kFlagTimeout | kFlagWindow,
                        base);
  InferenceRunConfig cfg;
  cfg.kind = *kind;
  cfg.problem = inference_problem(base.problem, f);
  cfg.backend = base.backend;
  cfg.seed = base.seed;
  cfg.timeout = base.timeout;
  cfg.check = vm.count("check") > 0;
  cfg.tracing = !trace.empty() || !html.empty();
  const InferenceRunResult r = run_inference(cfg);
  if (r.ranks.empty()) return 0;  // another process of an MPI job: rank 0 reports
  if (!trace.empty()) write_file(trace, inference_trace_json(r));
  if (!html.empty()) write_file(html, html_page(inference_trace_json(r)));
  if (vm.count("json"))
    std::cout << json_text(inference_run_json(r)) << "\n";
  else
    std::cout << format_inference_report(r);
  if (!trace.empty() && !vm.count("json"))
    std::cout << "\nWrote the trace to " << trace << " (open it in visualizer/index.html)\n";
  if (!html.empty() && !vm.count("json")) std::cout << "\nWrote the visualizer page to " << html << " (open it in a browser)\n";
  return r.check.ran && !r.check.passed ? 1 : 0;
}

int predict_inference_command(const ModelShapeOptions& shape, const InferenceFlags& f, const po::variables_map& vm) {
  require(vm.count("new-tokens") > 0, "an inference shape needs the step's new tokens", Fix{{"--new-tokens 16K"}});
  refuse_given(vm, {"seq", "seqs", "strategies", "sensitivity", "trace", "html", "compare", "sharding", "kv-replicate",
                    "full", "docs", "pad-docs", "chunk"});
  const model::Machine m = inference_machine(shape, f, vm);
  const InferenceProblem p = inference_problem(model_problem(shape, vm, 0, m), f);
  const model::PrefillChoice c = model::choose_prefill(p, m);
  const bool decode = p.new_tokens <= kDecodeMost;
  const auto trend = decode ? decode_by_ranks(p, m) : std::vector<std::pair<int, model::InferenceTime>>{};
  if (vm.count("json")) {
    auto time_json = [](const model::InferenceTime& t) {
      return Json{{"strategy", std::string(inference_name(t.kind))}, {"time_ms", t.us / 1e3},
                  {"exposed_ms", t.exposed_us / 1e3},         {"bytes_sent_per_rank", t.bytes_sent},
                  {"peak_bytes", t.peak_bytes}};
    };
    Json j{{"machine", m.name},
           {"ranks", p.ranks},
           {"new_tokens", p.new_tokens},
           {"cached", p.cached},
           {"prefill", Json::array({time_json(c.pass_kv), time_json(c.pass_q)})},
           {"choice", std::string(inference_name(c.choice))}};
    Json d = Json::array();
    for (const auto& [ranks, t] : trend)
      d.push_back({{"ranks", ranks}, {"step_ms", t.us / 1e3},
                   {"per_token_ms", t.us / 1e3 / static_cast<double>(p.new_tokens)},
                   {"bytes_sent_per_rank", t.bytes_sent}});
    j["decode"] = d;
    std::cout << json_text(j) << "\n";
    return 0;
  }
  std::cout << "Inference, attention only: " << shape_line(p, m) << "\n\n"
            << "Prefill (time to first token):\n"
            << "  " << left("strategy", 10) << right("time ms", 10) << right("exposed ms", 12)
            << right("sent per rank", 16) << right("memory", 12) << "\n";
  for (const model::InferenceTime& t : {c.pass_kv, c.pass_q})
    std::cout << "  " << left(inference_name(t.kind), 10) << right(ms(t.us), 10) << right(ms(t.exposed_us), 12)
              << right(format_bytes(static_cast<double>(t.bytes_sent)), 16)
              << right(format_bytes(static_cast<double>(t.peak_bytes)), 12) << "\n";
  std::cout << "  faster: " << inference_name(c.choice) << "\n";
  if (decode) {
    std::cout << "\nDecode (" << p.new_tokens << " new token" << (p.new_tokens == 1 ? "" : "s")
              << " per sequence, cache spread over the ranks), by CP degree:\n"
              << "  " << right("C", 4) << right("step ms", 10) << right("per token ms", 14) << right("exposed ms", 12)
              << right("sent per rank", 16) << "\n";
    for (const auto& [ranks, t] : trend)
      std::cout << "  " << right(std::to_string(ranks), 4) << right(ms(t.us), 10)
                << right(ms(t.us / static_cast<double>(p.new_tokens)), 14) << right(ms(t.exposed_us), 12)
                << right(format_bytes(static_cast<double>(t.bytes_sent)), 16) << "\n";
  }
  return 0;
}

int plan_inference_command(const ModelShapeOptions& shape, const InferenceFlags& f, const po::variables_map& vm) {
  require(vm.count("new-tokens") > 0, "an inference shape needs the step's new tokens", Fix{{"--new-tokens 16K"}});
  refuse_given(vm, {"seq", "layers", "hidden", "top", "full", "docs", "pad-docs", "chunk"});
  const model::Machine m = inference_machine(shape, f, vm);
  const InferenceProblem p = inference_problem(model_problem(shape, vm, 0, m), f);
  const model::PrefillChoice c = model::choose_prefill(p, m);
  const bool decode = p.new_tokens <= kDecodeMost;
  const model::InferenceTime d = decode ? model::model_inference(p, InferenceKind::decode, m) : model::InferenceTime{};
  // Neither fits a GPU: the fewest ranks that would, each modeled there before it is named.
  constexpr int kMostRanks = 1024;
  const bool any_fits = model::fits(m, c.pass_kv) || model::fits(m, c.pass_q);
  const int most = m.max_nodes > 0 ? std::min(kMostRanks, m.max_nodes * m.ranks_per_node) : kMostRanks;
  const int fewest = any_fits ? p.ranks : model::fewest_ranks_that_fit(p, m, most);
  if (vm.count("json")) {
    Json j{{"machine", m.name},
           {"ranks", p.ranks},
           {"new_tokens", p.new_tokens},
           {"cached", p.cached},
           {"prefill",
            {{"choice", std::string(inference_name(c.choice))},
             {"pass_kv_ms", c.pass_kv.us / 1e3},
             {"pass_q_ms", c.pass_q.us / 1e3},
             {"new_share", c.new_share},
             {"message_bound", c.message_bound},
             {"bytes_bound", c.bytes_bound},
             {"reasons", c.reasons}}},
           {"fits", any_fits},
           {"fewest_ranks_that_fit", fewest}};
    if (decode) j["decode"] = {{"step_ms", d.us / 1e3}, {"per_token_ms", d.us / 1e3 / static_cast<double>(p.new_tokens)}};
    std::cout << json_text(j) << "\n";
    return 0;
  }
  std::cout << "Plan, attention only: " << shape_line(p, m) << "\n\n";
  if (!any_fits) {
    std::cout << "Nothing fits: pass-KV needs " << format_bytes(static_cast<double>(c.pass_kv.peak_bytes))
              << " and pass-Q " << format_bytes(static_cast<double>(c.pass_q.peak_bytes)) << " per GPU, more than the "
              << format_bytes(m.memory_gb * 1e9) << " one holds; "
              << (fewest > 0 ? "--ranks " + std::to_string(fewest) + " is the fewest of " + std::to_string(p.ranks) +
                                   " x 2^k on which one fits (re-checked)"
                             : "no count of " + std::to_string(p.ranks) + " x 2^k up to " + std::to_string(most) +
                                   " ranks" + (most < kMostRanks ? " (all " + m.name + " has)" : std::string()) +
                                   " holds it: use a shorter --cached" +
                                   (most < kMostRanks ? " or a machine of more nodes" : std::string()))
              << "\n\n";
  }
  std::cout << "Prefill: " << inference_name(c.choice) << " (time to first token " << ms(std::min(c.pass_kv.us, c.pass_q.us))
            << " ms)\n";
  for (std::size_t i = 0; i < c.reasons.size(); ++i) std::cout << "  " << i + 1 << ". " << c.reasons[i] << "\n";
  if (decode)
    std::cout << "\nDecode: " << ms(d.us / static_cast<double>(p.new_tokens)) << " ms per token (the cache spread over "
              << p.ranks << " ranks, Q to every rank, partials merged at home; sends "
              << format_bytes(static_cast<double>(d.bytes_sent)) << " per rank per step)\n";
  return 0;
}

}  // namespace cpsim::cli
