#include "sim/cli/cli.hpp"

#include <filesystem>
#include <iostream>

#include "sim/core/error.hpp"
#include "sim/core/json.hpp"
#include "sim/os/input_file.hpp"
#include "sim/os/output_file.hpp"

namespace cpsim::cli {

std::map<std::string, CommandInfo>& commands() {
  static std::map<std::string, CommandInfo> table;
  return table;
}

std::map<std::string, CommandInfo>& benches() {
  static std::map<std::string, CommandInfo> table;
  return table;
}

namespace {
// Every path named so far by an output or input flag of this command: no two may be the same file.
std::vector<std::pair<std::string, std::string>>& named_paths() {
  static std::vector<std::pair<std::string, std::string>> paths;
  return paths;
}

void name_path(const std::string& flag, const std::string& path) {
  auto& paths = named_paths();
  paths.emplace_back(flag, path);
  try {
    check_distinct(paths);
  } catch (...) {
    paths.pop_back();
    throw;
  }
}
}  // namespace

void check_output(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  check_output_file(flag, path);
  name_path(flag, path);
}

void check_output_dir(const std::string& flag, const std::string& dir, const std::vector<std::string>& files) {
  if (dir.empty()) return;
  check_output_folder(flag, dir);
  for (const std::string& f : files) name_path(flag, (std::filesystem::path(dir) / f).string());
}

std::string read_input(const std::string& flag, const std::string& path, const std::string& fix) {
  std::string text = read_input_file("--" + flag, path, fix);
  name_path(flag, path);
  return text;
}

std::string read_compare_trace(const std::string& path) {
  const std::string fix = "write one with cpsim run --trace FILE or cpsim predict --trace FILE";
  const std::string text =
      read_input("compare", path, "name a trace written by cpsim run --trace or cpsim predict --trace");
  const Json trace = parse_json(text, "--compare " + path, fix);
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace.contains("otherData"))
    throw UsageError("--compare " + path + " is not a cpsim trace; " + fix);
  return text;
}

}  // namespace cpsim::cli
