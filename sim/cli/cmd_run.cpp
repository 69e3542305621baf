// cpsim run: one context-parallel attention run on simulated ranks, with the per-rank table and the check.
#include <filesystem>
#include <iostream>

#include "sim/cli/cli.hpp"
#include "sim/cli/inference_cli.hpp"
#include "sim/cli/model_options.hpp"
#include "sim/cli/problem_options.hpp"
#include "sim/core/error.hpp"
#include "sim/core/json.hpp"
#include "sim/os/output_folder.hpp"
#include "sim/runtime/npy.hpp"
#include "sim/runtime/report.hpp"
#include "sim/runtime/trace.hpp"

namespace cpsim::cli {
namespace {

// The files --dump writes: q, k, v, out, lse, and for a backward dout, dq, dk, dv (all of them or none).
std::vector<std::string> dump_files(bool backward) {
  std::vector<std::string> files{"q.npy", "k.npy", "v.npy", "out.npy", "lse.npy"};
  if (backward) files.insert(files.end(), {"dout.npy", "dq.npy", "dk.npy", "dv.npy"});
  return files;
}

// The benchmark to inline (--bench-json FILE, for --html): the file's text, refused unless it is the output of
// `cpsim bench strategies --json` (one JSON object with its "config" and "results").
std::string read_bench_json(const std::string& path) {
  const std::string fix = "write one with cpsim bench strategies --json > FILE";
  const std::string text = read_input("bench-json", path, fix);
  const Json root = parse_json(text, "--bench-json " + path, fix);
  if (!root.is_object() || !root.contains("config") || !root.contains("results"))
    throw UsageError("--bench-json " + path +
                     " is not cpsim bench strategies output (no \"config\" and \"results\"); " + fix);
  return text;
}

// All of the files or none (output_folder.hpp): written into a temporary beside DIR, renamed into place at the end;
// a failure, SIGINT, SIGTERM or SIGHUP on the way removes what was written.
void dump(const std::string& dir, const RunResult& r) {
  const Problem& p = r.config.problem;
  const std::vector<std::int64_t> qs{p.batch, p.seq, p.heads, p.head_dim}, ks{p.batch, p.seq, p.kv_heads, p.head_dim};
  const GlobalTensors& t = r.tensors;
  OutputFolder folder(dir);
  auto put = [&](const char* name, const std::vector<double>& data, const std::vector<std::int64_t>& shape) {
    write_npy(folder.file(name), data, shape);
    folder.check_interrupted();
  };
  put("q.npy", t.q, qs);
  put("k.npy", t.k, ks);
  put("v.npy", t.v, ks);
  put("out.npy", t.out, qs);
  put("lse.npy", t.lse, {p.batch, p.heads, p.seq});
  if (r.config.backward) {
    put("dout.npy", t.dout, qs);
    put("dq.npy", t.dq, qs);
    put("dk.npy", t.dk, ks);
    put("dv.npy", t.dv, ks);
  }
  folder.commit();
}

// A measured run of a small shape is mostly thread scheduling on this machine's cores (docs/visualizer.md), so
// `--html` draws beside it the same run on the machine model, cpsim predict's default machine: its trace, or empty
// where the model does not take the run (a mask, more ranks than the model allows), and the page then names the
// command instead.
constexpr const char* kBesideMachine = "h100-sxm-8";
std::string modeled_beside(const RunConfig& cfg) {
  try {
    validate_model_problem(cfg.problem, cfg.strategy);
    const model::Machine m = model::load_machine(kBesideMachine);
    return trace_json(modeled_run(cfg.problem, {cfg.strategy, cfg.problem.a2a}, m, cfg.backward));
  } catch (const std::exception&) {
    return "";
  }
}

int cmd_run(const std::vector<std::string>& args) {
  po::options_description desc("cpsim run: context-parallel attention on simulated ranks, checked against one process");
  ProblemOptions opts;
  std::string dump_dir, trace_path, html_path, bench_path, compare_path;
  add_problem_options(desc, opts);
  InferenceFlags inference;
  add_inference_options(desc, inference, false);
  desc.add_options()("check", "compare with the single-process f64 reference; exit 1 when it fails")(
      "json", "print one JSON object instead of the tables")(
      "dump", po::value(&dump_dir), "write inputs and outputs as NumPy .npy files into this folder")(
      "trace", po::value(&trace_path),
      "write every rank's compute, communication and wait time to this file "
      "(Chrome trace JSON: opens in visualizer/index.html, Perfetto, chrome://tracing)")(
      "html", po::value(&html_path),
      "write the visualizer with this run inlined: one HTML file that opens with a "
      "double-click; without --compare the same run modeled on h100-sxm-8 is drawn beside it")(
      "bench-json", po::value(&bench_path),
      "with --html: also inline this output of "
      "`cpsim bench strategies --json` (the benchmark charts)")(
      "compare", po::value(&compare_path),
      "with --html: also inline this trace (`cpsim run --trace` or `cpsim "
      "predict --trace`); its timeline is drawn under this run's");
  po::variables_map vm;
  if (!parse("run", desc, args, vm)) return 0;
  if (inference_asked(vm, opts.strategy)) return run_inference_command(opts, inference, vm);  // inference_cli.hpp
  auto checked = to_run_config(opts, vm);  // validated once, here: the run takes `valid`
  RunConfig& cfg = checked.first;
  const ValidProblem& valid = checked.second;
  cfg.check = vm.count("check") > 0;
  cfg.keep_inputs = !dump_dir.empty();
  cfg.keep_outputs = !dump_dir.empty();  // only --dump reads them (a check keeps them anyway)

  // Every output path, and that no two outputs or inputs are the same file, before the run.
  check_output_dir("dump", dump_dir, dump_files(cfg.backward));
  check_output("trace", trace_path);
  check_output("html", html_path);
  if (!bench_path.empty() && html_path.empty()) throw UsageError("--bench-json goes into the page; add --html FILE");
  if (!compare_path.empty() && html_path.empty()) throw UsageError("--compare goes into the page; add --html FILE");
  const std::string compare = compare_path.empty() ? "" : read_compare_trace(compare_path);
  const std::string bench = bench_path.empty() ? "" : read_bench_json(bench_path);
  if (!html_path.empty()) visualizer_dir();  // the page's files must be there before the run starts
  cfg.tracing = !trace_path.empty() || !html_path.empty();

  const RunResult r = run(cfg, valid);
  if (r.ranks.empty()) return 0;  // another rank of an MPI job: rank 0 reports
  if (!dump_dir.empty()) dump(dump_dir, r);
  if (!trace_path.empty()) write_trace(trace_path, r);
  // With --html and no --compare, the page draws the same run modeled beside the measured one.
  const std::string beside = html_path.empty() || !compare.empty() ? "" : modeled_beside(cfg);
  if (!html_path.empty()) write_html(html_path, r, bench, compare.empty() ? beside : compare);
  if (vm.count("json")) {
    std::cout << json_text(run_json(r)) << "\n";
  } else {
    std::cout << format_report(r);
    if (!dump_dir.empty()) std::cout << "\nWrote q, k, v, out, lse" << (cfg.backward ? ", dout, dq, dk, dv" : "")
                                     << " as .npy into " << dump_dir << "\n";
    if (!trace_path.empty())
      std::cout << "\nWrote the trace to " << trace_path << " (open it in visualizer/index.html)\n";
    if (!html_path.empty())
      std::cout << "\nWrote the visualizer page to " << html_path << " (open it in a browser)"
                << (beside.empty() ? ""
                                   : ", with the same run modeled on " + std::string(kBesideMachine) + " beside it")
                << "\n";
  }
  return r.check.ran && !r.check.passed ? 1 : 0;
}

}  // namespace
CPSIM_COMMAND(run, "context-parallel attention on simulated ranks, checked against one process", cmd_run);
}  // namespace cpsim::cli
