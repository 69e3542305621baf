#include "sim/cli/cli.hpp"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "sim/core/error.hpp"
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
  std::ifstream f(path, std::ios::binary);
  if (!f || std::filesystem::is_directory(path)) throw UsageError("--" + flag + " " + path + " cannot be read; " + fix);
  name_path(flag, path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string read_compare_trace(const std::string& path) {
  const std::string text =
      read_input("compare", path, "name a trace written by cpsim run --trace or cpsim predict --trace");
  if (text.find("\"traceEvents\"") == std::string::npos || text.find("\"otherData\"") == std::string::npos)
    throw UsageError("--compare " + path +
                     " is not a cpsim trace; write one with cpsim run --trace FILE or "
                     "cpsim predict --trace FILE");
  return text;
}

}  // namespace cpsim::cli
