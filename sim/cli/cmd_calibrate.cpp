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
      ("out", po::value(&out), "write the machine file here (and print what was fitted); default: stdout");
  po::variables_map vm;
  if (!parse("calibrate", desc, args, vm)) return 0;
  require(!all_gather.empty() || !all_to_all.empty() || !sendrecv.empty() || !attention.empty(),
          "calibrate needs at least one table or bench output to fit",
          "give --sendrecv FILE, --all-gather FILE, --all-to-all FILE or --gpu-attention FILE");
  check_output("out", out);
  const model::Machine base = model::load_machine(machine);
  std::vector<model::NcclTable> tables;
  const std::string fix = "name a file the nccl-tests binary's output was saved to";
  for (const auto& [test, files, flag] : {std::tuple{model::NcclTest::sendrecv, &sendrecv, "sendrecv"},
                                          std::tuple{model::NcclTest::all_gather, &all_gather, "all-gather"},
                                          std::tuple{model::NcclTest::all_to_all, &all_to_all, "all-to-all"}})
    for (const auto& f : *files)
      tables.push_back(model::parse_nccl_table(test, read_input(flag, f, fix), std::filesystem::path(f).filename()));
  std::vector<model::AttentionBench> benches;
  for (const auto& f : attention)
    benches.push_back(model::parse_attention_bench(
        read_input("gpu-attention", f, "name the saved output of cpsim bench gpu_attention --json"),
        std::filesystem::path(f).filename()));
  model::Calibration c = model::calibrate(base, tables, benches);
  c.machine.name = name;
  c.machine.description = "calibrated by cpsim calibrate from the measurements in \"sources\", on " + base.name;
  const std::string text = model::machine_json(c.machine);
  model::parse_machine(text, "the calibrated machine");  // every fitted value within its plausible range
  if (out.empty()) {
    std::cout << text;
    return 0;
  }
  write_whole(out, text);
  std::cout << "Fitted on " << base.name << " (" << c.fitted.size() << " values; the rest kept):\n";
  for (const auto& f : c.fitted)
    std::cout << "  " << left(f.field, 36) << pad(fixed(f.before, 2), 10) << " -> " << left(fixed(f.after, 2), 10)
              << f.source.substr(f.source.find(": ") + 2) << "\n";
  for (const auto& check : c.checks) std::cout << "Check: " << check << "\n";
  std::cout << "Wrote " << out << " (use it with cpsim predict --machine " << out << ")\n";
  return 0;
}

}  // namespace

CPSIM_COMMAND(calibrate, "a machine file fitted to nccl-tests tables and cpsim bench gpu_attention --json",
              cmd_calibrate);

}  // namespace cpsim::cli
