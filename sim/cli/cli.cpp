#include "sim/cli/cli.hpp"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "sim/core/error.hpp"

namespace cpsim::cli {

std::map<std::string, CommandInfo>& commands() {
  static std::map<std::string, CommandInfo> table;
  return table;
}

std::map<std::string, CommandInfo>& benches() {
  static std::map<std::string, CommandInfo> table;
  return table;
}

bool parse(const std::string& command, const po::options_description& desc, const std::vector<std::string>& args,
           po::variables_map& vm) {
  po::options_description all(desc);
  all.add_options()("help,h", "show this help");
  try {
    po::store(po::command_line_parser(args).options(all).run(), vm);
    if (vm.count("help")) {
      std::cout << "usage: cpsim " << command << " [options]\n\n" << all << "\n";
      return false;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(std::string(e.what()) + "; see `cpsim " + command + " --help`");
  }
  return true;
}

std::size_t parse_size(const std::string& flag, const std::string& text) {
  std::size_t pos = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &pos);
  } catch (const std::exception&) {
    throw UsageError("--" + flag + " '" + text + "' is not a size; use a number with an optional K, M or G suffix");
  }
  std::string suffix = text.substr(pos);
  if (suffix.empty()) return v;
  if (suffix.size() == 1) {
    switch (std::toupper(static_cast<unsigned char>(suffix[0]))) {
      case 'K': return v << 10;
      case 'M': return v << 20;
      case 'G': return v << 30;
    }
  }
  throw UsageError("--" + flag + " '" + text + "' has an unknown suffix; use K, M or G (powers of 1024)");
}

void check_output(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  const std::filesystem::path p(path);
  const std::filesystem::path dir = p.has_parent_path() ? p.parent_path() : std::filesystem::path(".");
  if (!std::filesystem::is_directory(dir) || std::filesystem::is_directory(p))
    throw UsageError("--" + flag + " " + path + " is not a file in an existing folder; name a file such as run." +
                     (flag == "html" ? "html" : "json"));
}

std::string read_input(const std::string& flag, const std::string& path, const std::string& fix) {
  std::ifstream f(path, std::ios::binary);
  if (!f || std::filesystem::is_directory(path)) throw UsageError("--" + flag + " " + path + " cannot be read; " + fix);
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
