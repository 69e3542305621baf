#include "sim/cli/cli.hpp"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>
#include <stdexcept>

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
    const po::parsed_options parsed = po::command_line_parser(args).options(all).run();
    // Without a positional description Boost keeps a bare word as an option with no name and stores nothing.
    for (const po::option& o : parsed.options)
      if (o.string_key.empty() && !o.original_tokens.empty())
        throw UsageError("cpsim " + command + " takes no positional argument (got '" + o.original_tokens.front() +
                         "'); every input is a flag, see `cpsim " + command + " --help`");
    po::store(parsed, vm);
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
  const std::string not_a_size =
      "--" + flag + " '" + text + "' is not a size; use a number with an optional K, M or G suffix";
  const std::string too_large =
      "--" + flag + " '" + text + "' is too large for a size (at most 2^64 - 1); use a number such as 16K or 1M";
  // std::stoull would take "-1" as 2^64 - 1 and skip leading spaces: a size starts with a digit.
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text.front()))) throw UsageError(not_a_size);
  std::size_t pos = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &pos);
  } catch (const std::out_of_range&) {
    throw UsageError(too_large);
  } catch (const std::exception&) {
    throw UsageError(not_a_size);
  }
  std::string suffix = text.substr(pos);
  if (suffix.empty()) return v;
  if (suffix.size() == 1) {
    int shift = 0;
    switch (std::toupper(static_cast<unsigned char>(suffix[0]))) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
    }
    if (shift > 0) {
      if (v > (std::numeric_limits<unsigned long long>::max() >> shift)) throw UsageError(too_large);
      return v << shift;
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
