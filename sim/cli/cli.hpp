// The `cpsim` command: one file per subcommand, each registering itself here.
//
//   CPSIM_COMMAND(layout, "who owns which tokens, and the per-rank work", cmd_layout);
//   CPSIM_BENCH(attention, "tiled kernel GFLOP/s beside Eigen's matrix product", bench_attention);
//
// A command receives its own arguments (argv[0] is "cpsim layout"). It throws UsageError for bad input
// (main prints one line on stderr and exits 2, nothing else written) and Error for failures (exit 1).
#pragma once
#include <boost/program_options.hpp>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace cpsim::cli {

namespace po = boost::program_options;
using CommandFn = std::function<int(const std::vector<std::string>& args)>;

struct CommandInfo {
  std::string summary;
  CommandFn fn;
};

std::map<std::string, CommandInfo>& commands();  // "layout", "run", ...
std::map<std::string, CommandInfo>& benches();   // "attention", "comm", ...

struct Register {
  Register(std::map<std::string, CommandInfo>& table, const char* name, const char* summary, CommandFn fn) {
    table[name] = CommandInfo{summary, std::move(fn)};
  }
};

#define CPSIM_COMMAND(name, summary, fn) \
  static ::cpsim::cli::Register cpsim_command_##name(::cpsim::cli::commands(), #name, summary, fn)
#define CPSIM_BENCH(name, summary, fn) \
  static ::cpsim::cli::Register cpsim_bench_##name(::cpsim::cli::benches(), #name, summary, fn)

// Parses args against desc. Boost's errors become UsageError("<what>; see `cpsim <cmd> --help`").
// Returns false when --help was asked for (the help text is already printed to stdout).
bool parse(const std::string& command, const po::options_description& desc, const std::vector<std::string>& args,
           po::variables_map& vm);

// "64M" -> 67108864; accepts K, M, G (powers of 1024) and plain integers. Throws UsageError naming the flag.
std::size_t parse_size(const std::string& flag, const std::string& text);

// An output file (--trace, --html) must land in an existing folder: checked before any work starts, so a bad path
// costs one line and exit code 2, not a lost run. Empty path: nothing to check.
void check_output(const std::string& flag, const std::string& path);

// The whole text of an input file named by --flag; UsageError "--flag PATH cannot be read; <fix>" otherwise.
std::string read_input(const std::string& flag, const std::string& path, const std::string& fix);

// A trace to compare with (--compare FILE, for --html): the file's text, refused unless it is a cpsim trace.
std::string read_compare_trace(const std::string& path);

}  // namespace cpsim::cli
