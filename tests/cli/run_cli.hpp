// Runs the built `cpsim` binary and captures its exit code, stdout and stderr.
#pragma once
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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

// Every number that follows `key` (e.g. "\"calls_per_run\":") in a JSON text.
inline std::vector<double> values_after(const std::string& s, const std::string& key) {
  std::vector<double> out;
  for (std::size_t at = s.find(key); at != std::string::npos; at = s.find(key, at + 1))
    out.push_back(std::stod(s.substr(at + key.size())));
  return out;
}

}  // namespace cpsim::test
