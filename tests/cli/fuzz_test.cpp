// Seeded fuzzing of every command: random flags of each (read from its --help) with values from a pool of the good,
// the edge and the bad (0, negative, past 64 bits, 1e300, not a number, empty, a missing folder), a stray argument
// now and then. Whatever the line, cpsim must end by itself within the time limit, with exit 0, or exit 2 and one line
// "cpsim: error: ..." on stderr and nothing on stdout, never a signal; leave no file in its working folder when it
// fails, no process of its group behind, no shared-memory segment in /dev/shm. Quicker cases aim at the mask,
// sharding and size inputs of run, layout, predict and plan alone, and at the files the commands read (machine
// files, calibrate's tables and JSON, traces): deep nesting, duplicate keys, odd and huge numbers, FIFOs, devices.
// The seed is CPSIM_FUZZ_SEED when set, else a fixed one; a failure names the seed and the command line.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "run_cli.hpp"
#include "sim/os/child_process.hpp"
#include "tests/sanitizer.hpp"

using namespace cpsim;
namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kDefaultSeed = 20261201;
constexpr int kLinesPerCommand = 20;

const std::string kCpsim = std::string(CPSIM_BINARY_DIR) + "/cpsim";

std::set<std::string> shm_segments() {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/dev/shm", ec))
    if (e.path().filename().string().rfind("cpsim-", 0) == 0) names.insert(e.path().filename().string());
  return names;
}

std::set<std::string> entries(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::recursive_directory_iterator(dir)) names.insert(fs::relative(e.path(), dir).string());
  return names;
}

// The flags `cpsim <command> --help` lists, and whether each takes a value ("arg" after it).
std::vector<std::pair<std::string, bool>> flags_of(const std::vector<std::string>& command, const fs::path& dir) {
  ChildOptions o;
  o.stdout_path = (dir / ".help").string();
  o.stderr_path = "/dev/null";
  std::vector<std::string> argv{kCpsim};
  argv.insert(argv.end(), command.begin(), command.end());
  argv.push_back("--help");
  REQUIRE(run_child(argv, o).exit_code == 0);
  const std::string help = test::slurp(o.stdout_path);
  fs::remove(o.stdout_path);
  std::vector<std::pair<std::string, bool>> flags;
  static const std::regex line(R"((--[a-z][a-z0-9-]*) ?\]? ?(arg|[A-Z]+)?)");
  for (std::sregex_iterator it(help.begin(), help.end(), line), end; it != end; ++it) {
    const std::string f = (*it)[1];
    if (f == "--help" || f == "--step" || f == "--build-dir" || f == "--file") continue;  // interactive, or builds
    flags.emplace_back(f, (*it)[2].matched);
  }
  return flags;
}

const std::vector<std::string> kValues{"0",
                                       "1",
                                       "2",
                                       "3",
                                       "4",
                                       "8",
                                       "16",
                                       "64",
                                       "-1",
                                       "63",
                                       "1e300",
                                       "x",
                                       "",
                                       "99999999999999999999",
                                       "4K",
                                       "1M",
                                       "ring",
                                       "ulysses",
                                       "hybrid",
                                       "zigzag",
                                       "f32",
                                       "f64",
                                       "bf16",
                                       "threads",
                                       "processes",
                                       "out.json",
                                       "missing/x.json",
                                       "sub",
                                       "16,64",
                                       "0.5",
                                       "nan"};

// The mask, sharding and size inputs of run, layout, predict and plan, with values at the edges of what they hold:
// odd and huge sizes (2^62, 2^63 - 1, past it), negatives, empty list entries, document lists whose sums wrap.
const std::vector<std::string> kShapeFlags{"--seq",   "--seqs",     "--ranks", "--window",   "--docs",
                                           "--chunk", "--sharding", "--heads", "--kv-heads", "--head-dim",
                                           "--batch", "--a2a",      "--seed",  "--strategy", "--strategies"};
const std::vector<std::string> kShapeSwitches{"--full", "--pad-docs", "--backward", "--check"};
const std::vector<std::string> kShapeValues{"0",
                                            "1",
                                            "2",
                                            "3",
                                            "7",
                                            "12",
                                            "16",
                                            "63",
                                            "-1",
                                            "-9223372036854775808",
                                            "4611686018427387904",
                                            "9223372036854775807",
                                            "9223372036854775808",
                                            "4G",
                                            "1T",
                                            "",
                                            ",",
                                            "8,8",
                                            "8,,8",
                                            "8,8,",
                                            "13,8,21,6",
                                            "random:3",
                                            "random:4611686018427387904",
                                            "9223372036854775807,9223372036854775807",
                                            "4611686018427387904,4611686018427387904",
                                            "zigzag",
                                            "contiguous",
                                            "striped",
                                            "balanced",
                                            "global-zigzag",
                                            "doc-contiguous",
                                            "ring",
                                            "hybrid",
                                            "ring,,ulysses",
                                            "ring,ulysses",
                                            "1K,",
                                            "1K,2K"};
// Values each of these flags takes, drawn half the time, so that lines also reach runs that work.
const std::vector<std::string> kShapeGoodValues{"1", "2", "4", "8", "16", "32", "64", "zigzag", "contiguous", "striped",
                                                "ring", "ring,ulysses", "1K,2K", "8,8"};


// Runs one fuzzed line in `dir` and checks how it ended: by itself within 20 s, never by a signal, with exit 0, or
// exit 2 with one line "cpsim: error: ..." and nothing on stdout (never 1: an input error is exit 2). Its exit code.
int ends_in_0_or_2(const std::vector<std::string>& argv, const fs::path& dir, std::uint64_t seed) {
  std::string line = "cpsim";
  for (std::size_t a = 1; a < argv.size(); ++a) line += " '" + argv[a] + "'";
  CAPTURE(seed);
  CAPTURE(line);
  ChildOptions o;
  o.cwd = dir.string();
  o.stdin_path = "/dev/null";
  o.stdout_path = (dir / ".out").string();
  o.stderr_path = (dir / ".err").string();
  o.time_limit = std::chrono::seconds(20);
  if (!test::kShadowMemory) o.address_space_limit = std::int64_t{16} << 30;
  const ChildResult r = run_child(argv, o);
  const std::string out = test::slurp(o.stdout_path), err = test::slurp(o.stderr_path);
  CAPTURE(err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.signal == 0);
  CHECK((r.exit_code == 0 || r.exit_code == 2));
  if (r.exit_code == 2) {
    CHECK(test::count_lines(err) == 1);
    CHECK(err.rfind("cpsim: error: ", 0) == 0);
    CHECK(out.empty());
  }
  return r.exit_code;
}

// A JSON text drawn from the edges of what a reader must hold: a preset machine file with one value replaced, nested
// past any limit, a key given twice, numbers that fit no field (0.5 as a count, 1e19, past 64 bits), or broken text.
std::string edge_json(std::mt19937_64& rng, const std::string& machine) {
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  static const std::vector<std::string> numbers{"0",    "0.5",  "-1",   "1e19", "1e308", "-1e308", "18446744073709551616",
                                                "null", "true", "\"x\"", "[]",   "{}",    "1",      "128"};
  switch (pick(6)) {
    case 0: {  // a preset with one of its numbers replaced
      std::vector<std::size_t> at;
      for (std::size_t i = 0; i + 1 < machine.size(); ++i)
        if (machine[i] == ':' && machine[i + 1] == ' ' && i + 2 < machine.size() &&
            (std::isdigit(static_cast<unsigned char>(machine[i + 2])) != 0))
          at.push_back(i + 2);
      if (at.empty()) return machine;
      const std::size_t from = at[pick(at.size())];
      std::size_t to = from;
      while (to < machine.size() && machine[to] != ',' && machine[to] != '\n' && machine[to] != '}') ++to;
      return machine.substr(0, from) + numbers[pick(numbers.size())] + machine.substr(to);
    }
    case 1: {  // nested deeper than any reader should follow
      const std::size_t depth = 1 + pick(200000);
      return std::string(depth, '[') + std::string(pick(2) == 0 ? depth : 0, ']');
    }
    case 2:  // a key given twice
      return machine.substr(0, machine.rfind('}')) + ", \"name\": \"twice\"}";
    case 3: {  // the attention bench's shape with edge numbers
      const auto n = [&] { return numbers[pick(numbers.size())]; };
      return "{\"rows\": [{\"seq\": " + n() + ", \"head_dim\": " + n() + ", \"heads\": " + n() +
             ", \"batch\": " + n() + ", \"forward_ms\": " + n() + ", \"backward_ms\": " + n() + "}]}";
    }
    case 4:  // cut short
      return machine.substr(0, pick(machine.size()));
    default: {  // bytes that are no text
      std::string b(pick(4096), '\0');
      for (char& c : b) c = static_cast<char>(rng());
      return b;
    }
  }
}

}  // namespace

TEST_CASE("mask and size inputs at their edges: run layout predict plan end in exit 0 or 2 with one line") {
  const char* env = std::getenv("CPSIM_FUZZ_SEED");
  const std::uint64_t seed = env && *env ? std::strtoull(env, nullptr, 10) : kDefaultSeed;
  MESSAGE("shape fuzz seed " << seed << " (CPSIM_FUZZ_SEED=" << seed << " repeats this run)");
  std::mt19937_64 rng(seed);
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  const fs::path dir = fs::path(CPSIM_BINARY_DIR) / "tests" / ("shape_fuzz_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  int accepted = 0, refused = 0;
  for (const std::vector<std::string>& command :
       std::vector<std::vector<std::string>>{{"run"}, {"layout"}, {"predict"}, {"plan"}}) {
    // The flags of the list this command offers (its --help), so that most lines reach the values.
    std::vector<std::string> flags, switches;
    for (const auto& [flag, takes_value] : flags_of(command, dir)) {
      if (takes_value && std::find(kShapeFlags.begin(), kShapeFlags.end(), flag) != kShapeFlags.end())
        flags.push_back(flag);
      if (!takes_value && std::find(kShapeSwitches.begin(), kShapeSwitches.end(), flag) != kShapeSwitches.end())
        switches.push_back(flag);
    }
    REQUIRE(flags.size() >= 5);
    for (int i = 0; i < 16; ++i) {
      std::vector<std::string> argv{kCpsim};
      argv.insert(argv.end(), command.begin(), command.end());
      std::set<std::string> given;  // each flag once: a repeated flag is refused before any value is read
      for (std::size_t k = 0, n = 1 + pick(3); k < n; ++k) {
        const std::string& flag = flags[pick(flags.size())];
        if (!given.insert(flag).second) continue;
        argv.push_back(flag);
        argv.push_back(pick(2) == 0 ? kShapeGoodValues[pick(kShapeGoodValues.size())]
                                    : kShapeValues[pick(kShapeValues.size())]);
      }
      if (!switches.empty() && pick(3) == 0) argv.push_back(switches[pick(switches.size())]);
      const int rc = ends_in_0_or_2(argv, dir, seed);
      accepted += rc == 0;
      refused += rc == 2;
    }
  }
  MESSAGE(accepted << " lines ran, " << refused << " were refused");
  CHECK(accepted > 0);
  CHECK(refused > 0);
  fs::remove_all(dir);
}

TEST_CASE("file inputs at their edges: machine files, calibrate's inputs and traces end in exit 0 or 2 with one line") {
  const char* env = std::getenv("CPSIM_FUZZ_SEED");
  const std::uint64_t seed = env && *env ? std::strtoull(env, nullptr, 10) : kDefaultSeed;
  MESSAGE("file fuzz seed " << seed << " (CPSIM_FUZZ_SEED=" << seed << " repeats this run)");
  std::mt19937_64 rng(seed);
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  const fs::path dir = fs::path(CPSIM_BINARY_DIR) / "tests" / ("file_fuzz_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "a_folder");
  REQUIRE(::mkfifo((dir / "a_fifo").c_str(), 0600) == 0);  // nobody writes it: a reader that opens it waits forever
  // A preset machine file, as cpsim prints it: the text the mutations start from.
  ChildOptions print;
  print.stdout_path = (dir / "preset.json").string();
  print.stderr_path = "/dev/null";
  REQUIRE(run_child({kCpsim, "predict", "--print-machine", "h100-ib"}, print).exit_code == 0);
  const std::string machine = test::slurp(print.stdout_path);
  REQUIRE(machine.size() > 100);
  // Which flag reads the file, on which command line.
  const std::vector<std::vector<std::string>> uses{{"predict", "--seqs", "16K", "--machine"},
                                                   {"plan", "--seq", "64K", "--ranks", "8", "--machine"},
                                                   {"calibrate", "--machine"},
                                                   {"calibrate", "--gpu-attention"},
                                                   {"calibrate", "--sendrecv"},
                                                   {"calibrate", "--all-gather"},
                                                   {"run", "--ranks", "2", "--seq", "16", "--html", "p.html", "--compare"}};
  const std::vector<std::string> specials{"/dev/zero", "/dev/null", "a_fifo", "a_folder", "missing.json"};
  int accepted = 0, refused = 0;
  for (int i = 0; i < 40; ++i) {
    std::string file = "in_" + std::to_string(i) + ".json";
    if (pick(4) == 0) {
      file = specials[pick(specials.size())];
    } else {
      std::ofstream(dir / file, std::ios::binary) << edge_json(rng, machine);
    }
    std::vector<std::string> argv{kCpsim};
    const auto& use = uses[pick(uses.size())];
    argv.insert(argv.end(), use.begin(), use.end());
    argv.push_back(file);
    const int rc = ends_in_0_or_2(argv, dir, seed);
    accepted += rc == 0;
    refused += rc == 2;
    if (rc == 2) CHECK_FALSE(fs::exists(dir / "p.html"));  // nothing half-written
    fs::remove(dir / "p.html");
  }
  MESSAGE(accepted << " lines ran, " << refused << " were refused");
  CHECK(refused > 0);
  fs::remove_all(dir);
}

TEST_SUITE("slow") {
  TEST_CASE("any command line ends by itself: exit 0, or exit 2 with one line, and leaves nothing behind") {
    const char* env = std::getenv("CPSIM_FUZZ_SEED");
    const std::uint64_t seed = env && *env ? std::strtoull(env, nullptr, 10) : kDefaultSeed;
    MESSAGE("fuzz seed " << seed << " (CPSIM_FUZZ_SEED=" << seed << " repeats this run)");
    std::mt19937_64 rng(seed);
    auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };

    const fs::path dir = fs::path(CPSIM_BINARY_DIR) / "tests" / ("fuzz_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "sub");
    const std::set<std::string> shm_before = shm_segments();

    const std::vector<std::vector<std::string>> commands{{"run"},
                                                         {"attention"},
                                                         {"layout"},
                                                         {"predict"},
                                                         {"plan"},
                                                         {"judge"},
                                                         {"calibrate"},
                                                         {"bench", "strategies"},
                                                         {"bench", "comm"},
                                                         {"bench", "attention"},
                                                         {"bench", "inputs"}};
    int accepted = 0, refused = 0;
    for (const auto& command : commands) {
      const auto flags = flags_of(command, dir);
      REQUIRE(!flags.empty());
      for (int i = 0; i < kLinesPerCommand; ++i) {
        std::vector<std::string> argv{kCpsim};
        argv.insert(argv.end(), command.begin(), command.end());
        if (command[0] == "judge") argv.insert(argv.end(), {"zigzag_ring", "--no-build"});
        // Small shapes by default (a flag given twice is refused), so that a line the program accepts finishes in
        // moments.
        const std::vector<std::string> small =
            command[0] == "run" || command[0] == "attention" ? std::vector<std::string>{"--seq", "16"}
            : command[0] == "predict"                        ? std::vector<std::string>{"--seqs", "1K"}
            : command.back() == "strategies"                 ? std::vector<std::string>{"--seqs", "64", "--reps", "1"}
            : command.back() == "comm"                       ? std::vector<std::string>{"--maxbytes", "4K"}
            : command.back() == "attention" ? std::vector<std::string>{"--seq", "64", "--head-dim", "16"}
            : command.back() == "inputs"    ? std::vector<std::string>{"--samples", "1000"}
                                            : std::vector<std::string>{};
        argv.insert(argv.end(), small.begin(), small.end());
        const std::size_t n = 1 + pick(3);
        for (std::size_t k = 0; k < n; ++k) {
          const auto& [flag, takes_value] = flags[pick(flags.size())];
          argv.push_back(flag);
          if (takes_value) argv.push_back(kValues[pick(kValues.size())]);
        }
        if (pick(8) == 0) argv.push_back("stray");
        std::string line = "cpsim";
        for (std::size_t a = 1; a < argv.size(); ++a) line += " '" + argv[a] + "'";
        CAPTURE(seed);
        CAPTURE(line);

        const std::set<std::string> before = entries(dir);
        ChildOptions o;
        o.cwd = dir.string();
        o.stdin_path = "/dev/null";
        o.stdout_path = (dir / ".out").string();
        o.stderr_path = (dir / ".err").string();
        o.time_limit = std::chrono::seconds(30);
        // A wrong size turned into an allocation fails, not the machine (a build with a sanitizer's shadow memory
        // cannot start under RLIMIT_AS: there the memory check before allocation is all that guards).
        if (!test::kShadowMemory) o.address_space_limit = std::int64_t{16} << 30;
        const ChildResult r = run_child(argv, o);
        const std::string out = test::slurp(o.stdout_path), err = test::slurp(o.stderr_path);
        fs::remove(o.stdout_path);
        fs::remove(o.stderr_path);
        CAPTURE(err);
        CHECK_FALSE(r.timed_out);
        CHECK(r.signal == 0);
        CHECK_FALSE(r.group_left);
        CHECK((r.exit_code == 0 || r.exit_code == 2 || (command[0] == "judge" && r.exit_code == 1)));
        accepted += r.exit_code == 0;
        refused += r.exit_code == 2;
        if (r.exit_code == 2) {
          CHECK(test::count_lines(err) == 1);
          CHECK(err.rfind("cpsim: error: ", 0) == 0);
          CHECK(out.empty());
        }
        if (r.exit_code != 0) CHECK(entries(dir) == before);  // a refused or failed line writes nothing
        for (const std::string& e : entries(dir))
          if (!before.count(e)) fs::remove_all(dir / e);  // what a successful line wrote
      }
    }
    MESSAGE(accepted << " lines ran, " << refused << " were refused");
    CHECK(accepted > 0);  // the pool reaches runs that work, not only refusals
    CHECK(refused > 0);
    std::set<std::string> left;
    for (const std::string& s : shm_segments())
      if (!shm_before.count(s)) left.insert(s);
    CHECK(left.empty());
    fs::remove_all(dir);
  }
}
