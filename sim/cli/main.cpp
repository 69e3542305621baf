// cpsim: a simulator that teaches context-parallel attention.
#include <iostream>
#include <string>
#include <vector>

#include "sim/cli/cli.hpp"
#include "sim/cli/flag_names.hpp"
#include "sim/comm/launcher.hpp"
#include "sim/core/error.hpp"
#include "sim/os/output_file.hpp"

namespace {

void usage(std::ostream& os) {
  os << "usage: cpsim <command> [options]   (cpsim <command> --help for its options)\n\ncommands:\n";
  for (const auto& [name, info] : cpsim::cli::commands()) os << "  " << name << std::string(12 - std::min<std::size_t>(11, name.size()), ' ') << info.summary << "\n";
  os << "  bench       benchmarks:";
  for (const auto& [name, info] : cpsim::cli::benches()) os << " " << name;
  os << "\n";
}

int bench(const std::vector<std::string>& args) {
  const auto& table = cpsim::cli::benches();
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << "usage: cpsim bench <name> [options]\n\nbenchmarks:\n";
    for (const auto& [name, info] : table) std::cout << "  " << name << std::string(12 - std::min<std::size_t>(11, name.size()), ' ') << info.summary << "\n";
    if (args.empty()) throw cpsim::UsageError("name the benchmark to run (listed above); see `cpsim bench --help`");
    return 0;
  }
  auto it = table.find(args[0]);
  if (it == table.end()) throw cpsim::UsageError("unknown benchmark '" + args[0] + "'; see `cpsim bench --help`");
  return it->second.fn(std::vector<std::string>(args.begin() + 1, args.end()));
}

// The command's exit code, once its output is on its way: a write to standard output that failed (a full disk,
// /dev/full) is one line on stderr and exit 1, never a silent success.
int finished(int rc) { return cpsim::flush_stdout("cpsim") || rc != 0 ? rc : 1; }

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
      usage(std::cout);
      if (args.empty()) throw cpsim::UsageError("name the command to run (listed above); see `cpsim --help`");
      return finished(0);
    }
    const std::string name = args[0];
    std::vector<std::string> rest(args.begin() + 1, args.end());
    if (name == "bench") return finished(bench(rest));
    const auto& table = cpsim::cli::commands();
    auto it = table.find(name);
    if (it == table.end()) throw cpsim::UsageError("unknown command '" + name + "'; see `cpsim --help`");
    return finished(it->second.fn(rest));
  } catch (const cpsim::UsageError& e) {
    cpsim::flush_stdout("cpsim");
    // Under mpirun every rank parses the same command line and finds the same error: rank 0 says it.
    if (cpsim::launcher_rank() <= 0) std::cerr << "cpsim: error: " << cpsim::worded(e) << "\n";
    return 2;
  } catch (const std::exception& e) {
    cpsim::flush_stdout("cpsim");
    std::cerr << "cpsim: " << cpsim::worded(e) << "\n";  // a rank's failure: its fixes in this program's flags
    return 1;
  }
}
