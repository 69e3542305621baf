// cpsim run: one context-parallel attention run on simulated ranks, with the per-rank table and the check.
#include <filesystem>
#include <iostream>

#include "sim/cli/cli.hpp"
#include "sim/cli/problem_options.hpp"
#include "sim/core/error.hpp"
#include "sim/runtime/npy.hpp"
#include "sim/runtime/report.hpp"

namespace cpsim::cli {
namespace {

void dump(const std::string& dir, const RunResult& r) {
  const Problem& p = r.config.problem;
  std::filesystem::create_directories(dir);
  const std::vector<std::int64_t> qs{p.batch, p.seq, p.heads, p.head_dim}, ks{p.batch, p.seq, p.kv_heads, p.head_dim};
  const GlobalTensors& t = r.tensors;
  write_npy(dir + "/q.npy", t.q, qs);
  write_npy(dir + "/k.npy", t.k, ks);
  write_npy(dir + "/v.npy", t.v, ks);
  write_npy(dir + "/out.npy", t.out, qs);
  write_npy(dir + "/lse.npy", t.lse, {p.batch, p.heads, p.seq});
  if (r.config.backward) {
    write_npy(dir + "/dout.npy", t.dout, qs);
    write_npy(dir + "/dq.npy", t.dq, qs);
    write_npy(dir + "/dk.npy", t.dk, ks);
    write_npy(dir + "/dv.npy", t.dv, ks);
  }
}

int cmd_run(const std::vector<std::string>& args) {
  po::options_description desc("cpsim run: context-parallel attention on simulated ranks, checked against one process");
  ProblemOptions opts;
  std::string dump_dir;
  add_problem_options(desc, opts);
  desc.add_options()("check", "compare with the single-process f64 reference; exit 1 when it fails")(
      "json", "print one JSON object instead of the tables")(
      "dump", po::value(&dump_dir), "write inputs and outputs as NumPy .npy files into this folder");
  po::variables_map vm;
  if (!parse("run", desc, args, vm)) return 0;
  RunConfig cfg = to_run_config(opts, vm);
  cfg.check = vm.count("check") > 0;
  if (!dump_dir.empty() && std::filesystem::exists(dump_dir) && !std::filesystem::is_directory(dump_dir))
    throw UsageError("--dump " + dump_dir + " exists and is not a folder; name a new or existing folder");

  const RunResult r = run(cfg);
  if (!dump_dir.empty()) dump(dump_dir, r);
  if (vm.count("json")) {
    JsonWriter j;
    write_json(j, r);
    std::cout << j.str() << "\n";
  } else {
    std::cout << format_report(r);
    if (!dump_dir.empty()) std::cout << "\nWrote q, k, v, out, lse" << (cfg.backward ? ", dout, dq, dk, dv" : "")
                                     << " as .npy into " << dump_dir << "\n";
  }
  return r.check.ran && !r.check.passed ? 1 : 0;
}

}  // namespace
CPSIM_COMMAND(run, "context-parallel attention on simulated ranks, checked against one process", cmd_run);
}  // namespace cpsim::cli
