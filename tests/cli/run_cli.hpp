// Runs the built `cpsim` binary and captures its exit code, stdout and stderr.
#pragma once
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sim/core/json.hpp"

namespace cpsim::test {

struct CliResult {
  int rc = -1;
  std::string out, err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

inline CliResult run_cli(const std::string& args, const std::string& tag = "cli") {
  const std::string dir = std::string(CPSIM_BINARY_DIR) + "/tests";
  const std::string out = dir + "/" + tag + ".stdout", err = dir + "/" + tag + ".stderr";
  const std::string cmd = std::string(CPSIM_BINARY_DIR) + "/cpsim " + args + " >" + out + " 2>" + err + " </dev/null";
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  std::remove(out.c_str());
  std::remove(err.c_str());
  return r;
}

inline int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// How often `what` occurs in s.
inline int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// Every number under `key` (e.g. "calls_per_run"), in document order at any depth, of a JSON text; the text is
// read as cpsim reads its inputs (sim/core/json.hpp), so one that is not valid JSON fails the test.
inline std::vector<double> values_after(const std::string& json, const std::string& key) {
  std::vector<double> out;
  const auto walk = [&](const auto& self, const Json& j) -> void {
    if (j.is_object())
      for (const auto& item : j.items()) {
        if (item.key() == key && item.value().is_number()) out.push_back(item.value().get<double>());
        self(self, item.value());
      }
    if (j.is_array())
      for (const Json& x : j) self(self, x);
  };
  walk(walk, parse_json(json, "the output", "cpsim wrote it, so its writer is wrong"));
  return out;
}

}  // namespace cpsim::test
