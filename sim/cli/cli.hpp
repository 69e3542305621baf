// The `cpsim` command: one file per subcommand, each registering itself here.
//
//   CPSIM_COMMAND(layout, "who owns which tokens, and the per-rank work", cmd_layout);
//   CPSIM_BENCH(attention, "tiled kernel GFLOP/s beside Eigen's matrix product", bench_attention);
//
// A command receives its own arguments (argv[0] is "cpsim layout"). It throws UsageError for bad input
// (main prints one line on stderr and exits 2, nothing else written) and Error for failures (exit 1).
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "sim/cli/parse.hpp"  // parse, parse_size, parse_timeout

namespace cpsim::cli {

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

// Output paths are checked before any work starts, so a bad path costs one line and exit code 2, not a lost run:
// check_output: --flag PATH will be a file (sim/os/output_file.hpp: an existing, writable folder; not a folder
// itself); check_output_dir: --flag DIR will be a folder holding `files`. No two paths named by this command's
// outputs and inputs (read_input) may be the same file. Empty path: nothing to check.
void check_output(const std::string& flag, const std::string& path);
void check_output_dir(const std::string& flag, const std::string& dir, const std::vector<std::string>& files);

// The whole text of an input file named by --flag (sim/os/input_file.hpp: a regular file of at most 64 MiB);
// UsageError "--flag PATH cannot be read (...); <fix>" otherwise.
std::string read_input(const std::string& flag, const std::string& path, const std::string& fix);

// A trace to compare with (--compare FILE, for --html): the file's text, refused unless it is JSON (sim/core/json.hpp:
// parse_json's limits) holding a cpsim trace's "traceEvents" and "otherData".
std::string read_compare_trace(const std::string& path);

}  // namespace cpsim::cli
