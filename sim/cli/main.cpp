// cpsim: a simulator that teaches context-parallel attention.
#include <iostream>
#include <string>
#include <vector>

#include "sim/cli/cli.hpp"
#include "sim/comm/launcher.hpp"
#include "sim/core/error.hpp"

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
    return args.empty() ? 2 : 0;
  }
  auto it = table.find(args[0]);
  if (it == table.end()) throw cpsim::UsageError("unknown benchmark '" + args[0] + "'; see `cpsim bench --help`");
  return it->second.fn(std::vector<std::string>(args.begin() + 1, args.end()));
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
      usage(args.empty() ? std::cerr : std::cout);
      return args.empty() ? 2 : 0;
    }
    const std::string name = args[0];
    std::vector<std::string> rest(args.begin() + 1, args.end());
    if (name == "bench") return bench(rest);
    const auto& table = cpsim::cli::commands();
    auto it = table.find(name);
    if (it == table.end()) throw cpsim::UsageError("unknown command '" + name + "'; see `cpsim --help`");
    return it->second.fn(rest);
  } catch (const cpsim::UsageError& e) {
    // Under mpirun every rank parses the same command line and finds the same error: rank 0 says it.
    if (cpsim::launcher_rank() <= 0) std::cerr << "cpsim: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "cpsim: " << e.what() << "\n";
    return 1;
  }
}
