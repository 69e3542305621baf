// Every fix a program prints names its own flags: for each program (cpsim's commands, the lessons) a set of inputs
// that each make it refuse with a "use --X ..." fix, and every --X of that fix is a flag of the program printing it
// (its --help lists it), and no value it suggests is negative (a rounded-up length that wrapped). Shared code keeps
// its fixes apart as data (sim/core/error.hpp) and the program words them (sim/cli/flag_names.hpp), so this holds
// only when each parser registers its flags; a literal "use --X" outside the command line's own files would bypass
// that and is refused too.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "run_cli.hpp"
#include "sim/os/child_process.hpp"

using namespace cpsim;
namespace fs = std::filesystem;

namespace {

struct Output {
  int rc;
  std::string out, err;
};

// The program (cpsim, or a lesson) with these arguments, its stdout and stderr.
Output run_program(const std::vector<std::string>& argv) {
  const fs::path dir = fs::path(CPSIM_BINARY_DIR) / "tests";
  const std::string tag = "messages_" + std::to_string(::getpid());
  ChildOptions o;
  o.stdin_path = "/dev/null";
  o.stdout_path = (dir / (tag + ".out")).string();
  o.stderr_path = (dir / (tag + ".err")).string();
  o.time_limit = std::chrono::seconds(60);
  const ChildResult r = run_child(argv, o);
  Output out{r.exit_code, test::slurp(o.stdout_path), test::slurp(o.stderr_path)};
  fs::remove(o.stdout_path);
  fs::remove(o.stderr_path);
  return out;
}

std::set<std::string> flags_in(const std::string& text) {
  std::set<std::string> flags;
  static const std::regex flag(R"((^|[^A-Za-z0-9_-])(--[a-z][a-z0-9-]*))");
  for (std::sregex_iterator it(text.begin(), text.end(), flag), end; it != end; ++it) flags.insert((*it)[2]);
  return flags;
}

// The fix of a one-line error: what follows its last "; " ("use --seq 64 or ...", "pad them with --pad-docs ...").
std::string fix_of(const std::string& err) {
  const auto at = err.rfind("; ");
  return at == std::string::npos ? "" : err.substr(at + 2);
}

struct Program {
  std::vector<std::string> argv;                  // the program and its command ("cpsim", "bench", "strategies")
  std::vector<std::vector<std::string>> refused;  // inputs it refuses with a fix
};

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("every \"use --X\" a program prints names a flag of that program") {
  const std::string cpsim = std::string(CPSIM_BINARY_DIR) + "/cpsim";
  const std::string lessons = std::string(CPSIM_BINARY_DIR) + "/lessons/";
  const std::vector<Program> programs{
      {{cpsim, "run"},
       {{"--strategy", "ulysses", "--ranks", "3"},
        {"--strategy", "ulysses", "--ranks", "8", "--heads", "8", "--kv-heads", "2"},
        {"--strategy", "ulysses", "--ranks", "3", "--seq", "60", "--heads", "8"},
        {"--strategy", "hybrid", "--a2a", "3"},
        {"--a2a", "2"},
        {"--dtype", "bf16"},
        {"--dtype", "f16"},
        {"--ranks", "0"},
        {"--heads", "6", "--kv-heads", "4"},
        {"--seq", "1048576", "--heads", "32", "--memory-limit", "1M"},
        {"--timeout", "1e300"},
        {"--kv-replicate", "--strategy", "ring"},
        {"--strategy", "nope"},
        {"--seq", "63"},
        {"--seq", "9223372036854775807", "--ranks", "3"},
        {"--seq", "64", "--ranks", "4", "--docs", "30,34"}}},
      {{cpsim, "bench", "strategies"},
       {{"--strategies", "ulysses", "--ranks", "3", "--seqs", "64"},
        {"--seqs", "63"},
        {"--ranks", "4", "--seqs", "64", "--heads", "6", "--kv-heads", "4"},
        {"--reps", "0"},
        {"--ranks", "3", "--seqs", "9223372036854775807"}}},
      {{cpsim, "attention"}, {{"--heads", "6", "--kv-heads", "4"}, {"--dtype", "bf16"}, {"--seq", "0"}}},
      {{cpsim, "predict"}, {{"--seqs", "0"}, {"--ranks", "3", "--strategies", "ulysses"}}},
      {{cpsim, "plan"}, {{"--top", "0"}}},
      {{cpsim, "layout"}, {{"--ranks", "4", "--seq", "63"}, {"--ranks", "4", "--seq", "64", "--docs", "30,34"}}},
      {{cpsim, "bench", "comm"}, {{"--ranks", "1"}}},
      {{cpsim, "bench", "attention"}, {{"--dtype", "bf16"}}},
      {{cpsim, "bench", "inputs"}, {{"--samples", "0"}}},
      {{lessons + "lesson_01_sequence_split"}, {{"--ranks", "0"}}},
      {{lessons + "lesson_02_ulysses"}, {{"--ranks", "3"}}},
      {{lessons + "lesson_03_ring"}, {{"--ranks", "3", "--seq", "64"}}},
      {{lessons + "lesson_05_zigzag"}, {{"--seq", "63"}}},
      {{lessons + "lesson_06_all_gather"}, {{"--seq", "5"}}},
      {{lessons + "lesson_08_mesh"}, {{"--ranks", "4"}}},
      {{lessons + "lesson_09_gqa"}, {{"--seq", "33"}}},
  };
  for (const Program& prog : programs) {
    const Output help = run_program(prog.argv + std::vector<std::string>{"--help"});
    REQUIRE(help.rc == 0);
    const std::set<std::string> offered = flags_in(help.out);
    for (const auto& args : prog.refused) {
      std::string line;
      for (const std::string& a : prog.argv + args) line += (line.empty() ? "" : " ") + fs::path(a).filename().string();
      CAPTURE(line);
      const Output o = run_program(prog.argv + args);
      CAPTURE(o.err);
      CHECK(o.rc == 2);
      const std::string fix = fix_of(o.err);
      CHECK_FALSE(fix.empty());
      for (const std::string& f : flags_in(fix)) {
        CAPTURE(f);
        CHECK(offered.count(f) == 1);
      }
      static const std::regex negative(R"(--[a-z][a-z0-9-]* -[0-9])");
      CHECK_FALSE(std::regex_search(fix, negative));
    }
  }
}

TEST_CASE("shared code keeps its fixes apart for the program to word: no literal \"use --X\" outside the command line") {
  // The programs' own files (sim/cli, lessons, exercises) know their flags; the rooms below them may be reached from
  // several programs and give their fixes as data (error.hpp's Fix), which the running program words in its flags.
  const std::regex literal(R"re("[^"\n]*use --[a-z])re");
  std::vector<std::string> found;
  for (const char* room : {"core", "layout", "kernels", "comm", "strategies", "runtime", "model", "cuda"}) {
    const fs::path dir = fs::path(CPSIM_SOURCE_DIR) / "sim" / room;
    if (!fs::exists(dir)) continue;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      const std::string ext = e.path().extension().string();
      if (ext != ".cpp" && ext != ".hpp" && ext != ".cu" && ext != ".cuh") continue;
      const std::string text = test::slurp(e.path().string());
      std::size_t line_no = 1, start = 0;
      for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1, ++line_no) {
        const std::string line = text.substr(start, end - start);
        if (line.find_first_not_of(' ') != std::string::npos && line.compare(line.find_first_not_of(' '), 2, "//") == 0)
          continue;  // a comment
        if (std::regex_search(line, literal))
          found.push_back(fs::relative(e.path(), CPSIM_SOURCE_DIR).string() + ":" + std::to_string(line_no));
      }
    }
  }
  CAPTURE(found.size());
  for (const std::string& f : found) CAPTURE(f);
  std::string all;
  for (const std::string& f : found) all += f + " ";
  CHECK_MESSAGE(found.empty(), all);
}
