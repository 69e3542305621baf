// cpsim calibrate: a machine file fitted to nccl-tests tables and `cpsim bench gpu_attention --json` from the
// machine itself (sim/model/calibrate.hpp), starting from a base machine for everything the inputs do not measure.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "sim/cli/cli.hpp"
#include "sim/cli/model_text.hpp"
#include "sim/core/error.hpp"
#include "sim/model/calibrate.hpp"
#include "sim/model/calibrate_kernel.hpp"
#include "sim/model/cost.hpp"
#include "sim/model/fit.hpp"

namespace cpsim::cli {
namespace {

// Writes the whole text under a temporary name in the file's folder, then renames it: no half-written file is
// ever left under `path`.
void write_whole(const std::string& path, const std::string& text) {
  const std::filesystem::path p(path);
  const std::filesystem::path tmp = (p.has_parent_path() ? p.parent_path() : std::filesystem::path(".")) /
                                    ("." + p.filename().string() + ".tmp" + std::to_string(::getpid()));
  {
    std::ofstream f(tmp, std::ios::binary);
    f << text;
    f.flush();
    if (!f) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      throw Error("--out " + path + ": the machine file could not be written (disk full or no permission)");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, p, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw Error("--out " + path + ": could not be renamed into place (" + ec.message() + ")");
  }
}

// `--published`: the presets' kernel curves, launch and per-step cost refitted to the published figures they cite
// (sim/model/fit.hpp), each fit with its residuals, and the value the preset stores beside it.
void print_published_fits() {
  using namespace model;
  std::cout << "# The presets' fits to the published figures (sim/model/published.hpp, sim/model/fit.hpp)\n\n"
            << "## 1. Kernel curves: t = launch + flops / (tflops S / (S + half_len)), launch 2 us\n\n"
            << "Least squares, each point weighted by 1 / t; errors are model / published rate - 1.\n\n"
            << "| sweeps | curve | tflops | half_len | S=512 | 1K | 2K | 4K | 8K | 16K | rms |\n"
            << "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  const auto row = [](const char* family, const KernelSweep& s, const char* note) {
    const SweepFit f = fit_kernel_sweep(s, 2);
    std::cout << "| " << family << " | d=" << s.head_dim << (s.backward ? " backward" : " forward")
              << (s.causal ? " causal" : " full") << note << " | " << fixed(f.curve.tflops, 1) << " | "
              << fixed(f.curve.half_len, 1);
    for (double e : f.errors) std::cout << " | " << percent(e);
    std::cout << " | " << fixed(f.rms * 100, 1) << "% |\n";
  };
  for (const auto& [family, sweeps] : {std::pair{"FlashAttention-3, H100", &flash_attention_3_sweeps()},
                                       std::pair{"FlashAttention-2, H100", &flash_attention_2_sweeps()}})
    for (const KernelSweep& s : *sweeps) {
      row(family, s, "");
      if (s.backward && !s.causal)  // the causal backward derived from this head dim's three sweeps
        row(family,
            derived_causal_backward(find_sweep(*sweeps, s.head_dim, true, false),
                                    find_sweep(*sweeps, s.head_dim, false, false), s),
            " (derived)");
    }
  std::cout << "\nSources: the FlashAttention-3 paper (Shah et al. 2024), Fig. 5 (forward) and Fig. 6 (backward), H100 "
               "SXM5, BF16, batch x S = 16K tokens, heads x D = 2048; FlashAttention-2: the same figures' "
               "FlashAttention-2 bars. (derived): full backward x causal forward / full forward at each S.\n";
  std::cout << "\n## 2. The launch, fitted together with every curve's tflops and half_len\n\n"
            << "| sweeps | unconstrained optimum (us) | standard error (us) | largest launch with every half_len >= 0 "
               "| rms at launch 0 / 2 / 5 / 10 / 20 us |\n| --- | --- | --- | --- | --- |\n";
  for (const auto& [name, sweeps] : {std::pair{"FlashAttention-3, H100", &flash_attention_3_sweeps()},
                                     std::pair{"FlashAttention-2, H100", &flash_attention_2_sweeps()}}) {
    const LaunchFit l = fit_shared_launch(*sweeps);
    std::cout << "| " << name << " | " << fixed(l.launch_us, 1) << " | " << fixed(l.standard_error, 1) << " | "
              << fixed(l.max_launch_us, 1) << " |";
    for (std::size_t i = 0; i < l.profile.size(); ++i)
      std::cout << (i ? " / " : " ") << fixed(l.profile[i].second * 100, 3) << "%";
    std::cout << " |\n";
  }
  std::cout << "\nThe sweeps hold batch x S fixed, so flops / S is one constant per curve and a per-call launch has the "
               "shape of half_len's term (but for the occupancy, which differs a little from point to point): the "
               "residuals move by hundredths of a percent with the launch, and the presets keep an assumed 2 us.\n";
  std::cout << "\n## 3. framework.step_bytes_per_element, fitted to ring-flash-attention's ring rows (8 GPUs, 8K "
               "tokens each, 32 heads)\n\n"
            << "| machine | run | published it/s | no step cost | error | fitted | error | d t / d bytes (us) |\n"
            << "| --- | --- | --- | --- | --- | --- | --- | --- |\n";
  for (const char* name : {"h800-sxm-8", "a100-sxm-8"}) {
    const Machine m = load_machine(name);
    const StepFit f = fit_step_bytes(m, ring_runs_on(name));
    for (const auto& r : f.rows)
      std::cout << "| " << name << " | " << sharding_name(r.run.sharding) << (r.run.backward ? " fwd+bwd" : " fwd")
                << " | " << fixed(r.run.per_s, 1) << " | " << fixed(r.model_per_s_at_0, 1) << " | "
                << percent(r.model_per_s_at_0 / r.run.per_s - 1) << " | " << fixed(r.model_per_s, 1) << " | "
                << percent(r.model_per_s / r.run.per_s - 1) << " | " << fixed(r.us_per_byte, 2) << " |\n";
    Machine fitted = m;
    fitted.step_us = 0;
    fitted.step_bytes_per_element = f.step_bytes;
    const double per_step_us = model::step_cost_us(fitted, model::ring_flash_attention_out_elements());
    std::cout << "| " << name << " | **step_bytes_per_element = " << fixed(f.step_bytes, 2) << "**"
              << (f.at_bound ? " (at 0)" : "") << " (" << fixed(per_step_us, 1)
              << " us a step on 8K x 32 x 128), the preset stores " << fixed(m.step_bytes_per_element, 2)
              << " | | rms | " << fixed(f.rms_at_0 * 100, 1) << "% | | " << fixed(f.rms * 100, 1) << "% | |\n";
  }
}

// Every fitted value with the rms relative error of its fit and the rows it came from, then the warnings and each
// table replayed on the fitted machine.
void print_fits(std::ostream& os, const std::string& base, const model::Calibration& c) {
  os << "Fitted on " << base << " (" << c.fitted.size() << " values; the rest kept):\n"
     << "  " << left("field", 32) << right("before", 10) << "    " << left("after", 10) << right("residual", 9) << "  "
     << left("sizes", 30) << "from\n";
  for (const auto& f : c.fitted)
    os << "  " << left(f.field, 32) << right(fixed(f.before, 2), 10) << " -> " << left(fixed(f.after, 2), 10)
       << right(f.residual < 0 ? std::string("-") : fixed(f.residual * 100, 1) + "%", 9) << "  "
       << left(f.sizes.empty() ? std::string("-") : f.sizes, 30) << f.source.substr(f.source.find(": ") + 2) << "\n";
  for (const auto& w : c.warnings) os << "Warning: " << w << "\n";
  for (const auto& check : c.checks) os << "Check: " << check << "\n";
}

int cmd_calibrate(const std::vector<std::string>& args) {
  po::options_description desc(
      "cpsim calibrate: a machine file fitted to nccl-tests tables and cpsim bench gpu_attention --json");
  std::string machine = "h100-ib", name = "calibrated", out;
  std::vector<std::string> all_gather, all_to_all, sendrecv, attention;
  desc.add_options()                                                                                        //
      ("machine", po::value(&machine)->default_value(machine), "the machine whose other values are kept")   //
      ("all-gather", po::value(&all_gather)->composing(), "all_gather_perf output (one node, or several)")  //
      ("all-to-all", po::value(&all_to_all)->composing(), "alltoall_perf output (one node, or several)")    //
      ("sendrecv", po::value(&sendrecv)->composing(), "sendrecv_perf output on 2 ranks (one node or two)")  //
      ("gpu-attention", po::value(&attention)->composing(), "`cpsim bench gpu_attention --json` output")    //
      ("name", po::value(&name)->default_value(name), "the calibrated machine's name")                      //
      ("out", po::value(&out), "write the machine file here (and print what was fitted); default: stdout")  //
      ("published", "print the presets' fits to the published figures they cite, with residuals; fits nothing else");
  po::variables_map vm;
  if (!parse("calibrate", desc, args, vm)) return 0;
  if (vm.count("published")) {
    require(all_gather.empty() && all_to_all.empty() && sendrecv.empty() && attention.empty() && out.empty(),
            "--published prints the presets' own fits and takes no tables", "run it alone: cpsim calibrate --published");
    print_published_fits();
    return 0;
  }
  require(!all_gather.empty() || !all_to_all.empty() || !sendrecv.empty() || !attention.empty(),
          "calibrate needs at least one table or bench output to fit",
          "give --sendrecv FILE, --all-gather FILE, --all-to-all FILE or --gpu-attention FILE");
  check_output("out", out);
  const model::Machine loaded = model::load_machine(machine);
  std::vector<model::NcclTable> tables;
  const std::string fix = "name a file the nccl-tests binary's output was saved to";
  for (const auto& [test, files, flag] : {std::tuple{model::NcclTest::sendrecv, &sendrecv, "sendrecv"},
                                          std::tuple{model::NcclTest::all_gather, &all_gather, "all-gather"},
                                          std::tuple{model::NcclTest::all_to_all, &all_to_all, "all-to-all"}})
    for (const auto& f : *files)
      for (auto& t : model::parse_nccl_runs(test, read_input(flag, f, fix), std::filesystem::path(f).filename()))
        tables.push_back(std::move(t));
  std::vector<model::AttentionBench> benches;
  for (const auto& f : attention)
    benches.push_back(model::parse_attention_bench(
        read_input("gpu-attention", f, "name the saved output of cpsim bench gpu_attention --json"),
        std::filesystem::path(f).filename()));
  const model::Machine base = attention.empty() ? loaded : model::with_own_kernels(loaded);
  // The per-call cost first (calibrate_kernel.hpp), so that the curves are fitted net of it.
  model::Machine with_launch = base;
  std::vector<model::FitLine> launches;
  for (const auto& b : benches)
    if (b.seqs.size() >= 2) {
      const model::KernelLaunchFit l = model::fit_kernel_launch(base, b);
      launches.push_back({"attention.launch_us", with_launch.launch_us, l.launch_us, l.rms, l.rows,
                          "attention.launch_us: " + b.origin + ", " + l.rows + ": rms " + fixed(l.rms * 100, 1) + "%" +
                              (l.at_bound ? " (held at 0: the data ask for less)" : "")});
      with_launch.launch_us = l.launch_us;
      with_launch.sources["attention.launch_us"] = launches.back().source;
    }
  model::Calibration c = model::calibrate(with_launch, tables, benches);
  c.fitted.insert(c.fitted.begin(), launches.begin(), launches.end());
  c.machine.name = name;
  c.machine.description = "calibrated by cpsim calibrate from the measurements in \"sources\", on " + base.name;
  const std::string text = model::machine_json(c.machine);
  model::parse_machine(text, "the calibrated machine");  // every fitted value within its plausible range
  if (!out.empty()) write_whole(out, text);
  // What was fitted: to stdout beside a written file, to stderr when the file itself goes to stdout.
  std::ostream& report = out.empty() ? std::cerr : std::cout;
  if (out.empty()) std::cout << text;
  print_fits(report, base.name, c);
  if (!out.empty()) report << "Wrote " << out << " (use it with cpsim predict --machine " << out << ")\n";
  return 0;
}

}  // namespace

CPSIM_COMMAND(calibrate, "a machine file fitted to nccl-tests tables and cpsim bench gpu_attention --json",
              cmd_calibrate);

}  // namespace cpsim::cli
