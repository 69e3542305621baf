// The cpsim command under bad input and a full disk: one line and exit 2 before any work for what cannot work; one
// line and a nonzero exit, nothing half-written, for a write that fails; nothing given is silently ignored.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "run_cli.hpp"
#include "sim/os/child_process.hpp"

using namespace cpsim;
using cpsim::test::count_lines;
using cpsim::test::run_cli;
using cpsim::test::slurp;
namespace fs = std::filesystem;

namespace {

const std::string kCpsim = std::string(CPSIM_BINARY_DIR) + "/cpsim";

// A fresh folder for one case, removed after it.
struct Folder {
  fs::path path;
  explicit Folder(const std::string& name)
      : path(fs::path(CPSIM_BINARY_DIR) / "tests" / ("robust_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Folder() { fs::remove_all(path); }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::recursive_directory_iterator(path)) names.push_back(e.path().filename().string());
    return names;
  }
};

struct Ran {
  ChildResult r;
  std::string out, err;
};

// cpsim with these arguments, its stdout to `stdout_path` (a file of the folder when empty), stderr captured.
Ran run_cpsim(const std::vector<std::string>& args, const Folder& dir, ChildOptions o = {}) {
  std::vector<std::string> argv{kCpsim};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string out = (dir.path / ".stdout").string(), err = (dir.path / ".stderr").string();
  if (o.stdout_path.empty()) o.stdout_path = out;
  o.stderr_path = err;
  o.stdin_path = "/dev/null";
  Ran ran{run_child(argv, o), "", ""};
  ran.out = slurp(out);
  ran.err = slurp(err);
  fs::remove(out);
  fs::remove(err);
  return ran;
}

}  // namespace

TEST_CASE("output to a full stdout is one line on stderr and exit 1, tables and JSON alike") {
  Folder dir("stdout");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run"}, {"run", "--json"}, {"layout", "--seq", "4096", "--ranks", "64"}}) {
    ChildOptions o;
    o.stdout_path = "/dev/full";
    const Ran ran = run_cpsim(args, dir, o);
    CAPTURE(args[0]);
    CHECK(ran.r.exit_code == 1);
    CHECK(ran.err == "cpsim: error: cannot write the output (No space left on device)\n");
  }
}

TEST_CASE("a trace, a page or a dump that cannot be written whole is one line, exit 1, and nothing under its name") {
  Folder dir("fsize");
  ChildOptions o;
  o.file_size_limit = 4096;  // RLIMIT_FSIZE: every write past 4 KiB fails as on a full disk
  const std::string trace = (dir.path / "run.json").string(), page = (dir.path / "run.html").string(),
                    dump = (dir.path / "npy").string();
  for (const auto& [flag, path] :
       std::vector<std::pair<std::string, std::string>>{{"--trace", trace}, {"--html", page}, {"--dump", dump}}) {
    CAPTURE(flag);
    const Ran ran = run_cpsim({"run", "--backward", flag, path}, dir, o);
    CHECK(ran.r.exit_code == 1);
    CHECK(count_lines(ran.err) == 1);
    CHECK(ran.err.find("File too large") != std::string::npos);
    const std::vector<std::string> left = dir.entries();  // no file, no folder, no temporary
    CHECK_MESSAGE(left.empty(), (left.empty() ? "" : left.front()));
  }
}

TEST_CASE("every output path is checked before the run: missing folder, a file as folder, the same path twice") {
  Folder dir("paths");
  const std::string a = (dir.path / "a.json").string();
  std::ofstream(dir.path / "plain") << "x";
  std::ofstream(dir.path / "a.json") << R"({"traceEvents": [], "otherData": {}})";
  fs::create_directories(dir.path / "d");
  const std::string plain = (dir.path / "plain").string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"run", "--trace", (dir.path / "none" / "t.json").string()}, "does not exist"},
      {{"run", "--dump", plain + "/d"}, "does not exist"},
      {{"run", "--dump", plain}, "exists and is not a folder"},
      {{"run", "--html", dir.path.string()}, "is a folder"},
      {{"run", "--trace", a, "--html", a}, "--trace and --html name the same file"},
      {{"run", "--trace", (dir.path / "d" / "q.npy").string(), "--dump", (dir.path / "d").string()},
       "name the same file"},
      {{"run", "--html", a, "--compare", a}, "name the same file"},
      {{"run", "--trace", ""}, "--trace got an empty value"},
  };
  for (const auto& [args, says] : cases) {
    CAPTURE(args.back());
    const Ran ran = run_cpsim(args, dir);
    CHECK(ran.r.exit_code == 2);
    CHECK(count_lines(ran.err) == 1);
    CHECK(ran.err.find(says) != std::string::npos);
    CHECK(ran.out.empty());  // refused before the run: no table
  }
  auto left = dir.entries();
  std::sort(left.begin(), left.end());
  CHECK(left == std::vector<std::string>{"a.json", "d", "plain"});  // what was there before, nothing more
}

TEST_CASE("nothing given is silently ignored: stray arguments, --kv-replicate with nothing to replicate") {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"run extra", "cpsim run takes no positional argument (got 'extra'); every input is a flag"},
      {"layout --seq 16 8", "takes no positional argument (got '8')"},
      {"run --kv-replicate --strategy ulysses", "nothing would be replicated; drop --kv-replicate"},
      {"run --kv-replicate --strategy hybrid --kv-heads 2 --heads 4 --a2a 2", "nothing would be replicated"},
      {"bench strategies --backward", "unrecognised option '--backward'"},
      {"bench strategies --a2a 2 --strategies ring", "--strategies has no hybrid"},
      {"bench strategies --kv-replicate --strategies ring", "lists neither ulysses nor hybrid"},
  };
  for (const auto& [args, says] : cases) {
    CAPTURE(args);
    const auto r = run_cli(args, "robust_ignores");
    CHECK(r.rc == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find(says) != std::string::npos);
  }
}

TEST_CASE("numbers out of their type's range are too large or too small, not 'invalid' or 'must be positive'") {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"run --timeout 1e300", "--timeout 1e+300 is too large (at most 1000000 s)"},
      {"run --timeout 1e999", "--timeout 1e999 is too large"},
      {"run --timeout 0.0001", "is too small (at least 0.001 s, a millisecond)"},
      {"run --ranks 99999999999", "--ranks 99999999999 is too large (at most 2147483647)"},
      {"run --ranks -99999999999", "--ranks -99999999999 is too small (at least -2147483648)"},
      {"run --seq 99999999999999999999", "--seq '99999999999999999999' is too large for a size"},
      {"run --seq 9223372036854775808", "--seq '9223372036854775808' is too large (at most 9223372036854775807)"},
      {"run --seq 16777216T", "--seq '16777216T' is too large for a size"},
      {"attention --seq 8388608T", "--seq '8388608T' is too large (at most 9223372036854775807)"},
      {"run --heads 1.5", "--heads '1.5' is not a whole number"},
      {"attention --batch 1e3", "--batch '1e3' is not a whole number"},
      {"run --window -1", "--window '-1' is not a size"},
      {"run --memory-limit 99999999999T", "--memory-limit '99999999999T' is too large"},
      {"run --memory-limit 1X", "has an unknown suffix"},
      {"bench strategies --seqs -4", "--seqs '-4' is not a size"},
  };
  for (const auto& [args, says] : cases) {
    CAPTURE(args);
    const auto r = run_cli(args, "robust_numbers");
    CHECK(r.rc == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find(says) != std::string::npos);
  }
}

TEST_CASE("shapes whose sizes wrap 64 bits are refused at once, naming the tensor and the flag") {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"run --heads 288230376151711744 --kv-heads 1", "q [B, S, Nq, D] = [1, 64, 288230376151711744, 16]"},
      {"run --batch 288230376151711744", "use a smaller --batch"},
      {"attention --heads 288230376151711744 --kv-heads 1", "use a smaller --heads"},
      {"attention --heads 288230376151711743 --kv-heads 2", "more than one process can address"},
      {"attention --tile 2147483647", "the tile holds 1 to 4096 rows"},
      {"bench comm --maxbytes 8388607T", "more than the"},
  };
  for (const auto& [args, says] : cases) {
    CAPTURE(args);
    const auto r = run_cli(args, "robust_sizes");
    CHECK(r.rc == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find(says) != std::string::npos);
  }
}

TEST_CASE("cpsim and cpsim bench without a name list what there is and say what is missing in one line") {
  for (const std::string& args : {std::string(""), std::string("bench")}) {
    const auto r = run_cli(args, "robust_bare");
    CHECK(r.rc == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.out.find("usage: cpsim") != std::string::npos);
  }
}

TEST_CASE("values that would silently mean something else are refused: --a2a 0, a negative seed, empty list entries") {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"run --strategy hybrid --a2a 0 --ranks 3 --seq 72", "--a2a must be a positive A2A group size A"},
      {"run --strategy hybrid --a2a -2", "--a2a must be a positive A2A group size A"},
      {"run --seed -1", "--seed -1 must not be negative"},
      {"run --seed=-7", "--seed -7 must not be negative"},
      {"layout --seed -1 --docs random:2", "--seed -1 must not be negative"},
      {"attention --seed -3", "--seed -3 must not be negative"},
      {"predict --strategies ring,,ulysses", "--strategies 'ring,,ulysses' has an empty entry (entry 2 of 3)"},
      {"predict --strategies ring,", "has an empty entry (entry 2 of 2)"},
      {"predict --seqs 16K,,32K", "--seqs '16K,,32K' has an empty entry"},
      {"bench strategies --seqs 64,", "--seqs '64,' has an empty entry"},
      {"bench strategies --strategies ,ring", "--strategies ',ring' has an empty entry (entry 1 of 2)"},
      {"run --docs 8,8,", "ends in a comma"},
      {"run --docs 8,,8", "'' is not a document length"},
  };
  for (const auto& [args, says] : cases) {
    CAPTURE(args);
    const auto r = run_cli(args, "robust_meaning");
    CAPTURE(r.err);
    CHECK(r.rc == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find(says) != std::string::npos);
    CHECK(r.out.empty());
  }
}

TEST_CASE("document lengths whose sum passes 2^63 - 1 are refused with exit 2, naming the true sum") {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"run --docs 9223372036854775807,9223372036854775807 --seq 16", "sum to 18446744073709551614 tokens"},
      {"run --docs 9223372036854775807,9223372036854775807,18 --seq 16", "sum to 18446744073709551632 tokens"},
      {"run --docs 9223372036854775807,1", "sum to 9223372036854775808 tokens"},
      {"layout --docs 9223372036854775807,9223372036854775807", "more than a sequence holds"},
      {"run --docs 9223372036854775807 --pad-docs", "padded to multiples of 2C, sum to 9223372036854775808"},
  };
  for (const auto& [args, says] : cases) {
    CAPTURE(args);
    const auto r = run_cli(args, "robust_docsum");
    CAPTURE(r.err);
    CHECK(r.rc == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find(says) != std::string::npos);
  }
}

TEST_CASE("inputs that would take minutes or end in bad_alloc are refused at once with one line") {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"layout --sharding balanced --chunk 1 --seq 256K", "balanced sharding deals at most 8192 chunks (S/T = 262144"},
      {"layout --sharding balanced --chunk 1 --seq 1G", "use --chunk 131072"},
      {"run --sharding balanced --chunk 1 --seq 16K", "balanced sharding deals at most 8192 chunks"},
      {"layout --docs random:4194304 --seq 64M", "rank pairs in each of the 4194304 documents"},
      {"bench attention --seq 1099511627776", "more than one process can address"},
      {"bench attention --seq 1048576 --head-dim 65536", "needs up to 8.0 TiB of memory, more than the"},
  };
  for (const auto& [args, says] : cases) {
    CAPTURE(args);
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = run_cli(args, "robust_slow");
    CAPTURE(r.err);
    CHECK(r.rc == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find(says) != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60));  // refused, not run (bounded)
  }
}

TEST_CASE("a lesson checks its --trace path before it runs, as cpsim run does: exit 2, no transcript") {
  Folder dir("lesson_trace");
  const std::string lesson = std::string(CPSIM_BINARY_DIR) + "/lessons/lesson_03_ring";
  ChildOptions o;
  o.stdin_path = "/dev/null";
  o.stdout_path = (dir.path / "out").string();
  o.stderr_path = (dir.path / "err").string();
  o.time_limit = std::chrono::seconds(60);
  const ChildResult r = run_child({lesson, "--trace", (dir.path / "none" / "t.json").string()}, o);
  const std::string out = slurp(o.stdout_path), err = slurp(o.stderr_path);
  CAPTURE(err);
  CHECK(r.exit_code == 2);
  CHECK(count_lines(err) == 1);
  CHECK(err.find("does not exist") != std::string::npos);
  CHECK(out.empty());
}
