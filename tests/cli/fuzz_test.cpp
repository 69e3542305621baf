// Seeded fuzzing of every command: random flags of each (read from its --help) with values from a pool of the good,
// the edge and the bad (0, negative, past 64 bits, 1e300, not a number, empty, a missing folder), a stray argument
// now and then. Whatever the line, cpsim must end by itself within the time limit, with exit 0, or exit 2 and one line
// "cpsim: error: ..." on stderr and nothing on stdout, never a signal; leave no file in its working folder when it
// fails, no process of its group behind, no shared-memory segment in /dev/shm. A quicker case aims at the mask,
// sharding and size inputs of run, layout, predict and plan alone.
// The seed is CPSIM_FUZZ_SEED when set, else a fixed one; a failure names the seed and the command line.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
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
                                            "ring",
                                            "hybrid",
                                            "ring,,ulysses",
                                            "ring,ulysses",
                                            "1K,",
                                            "1K,2K"};
// Values each of these flags takes, drawn half the time, so that lines also reach runs that work.
const std::vector<std::string> kShapeGoodValues{"1", "2", "4", "8", "16", "32", "64", "zigzag", "contiguous", "striped",
                                                "ring", "ring,ulysses", "1K,2K", "8,8"};

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
      CHECK((r.exit_code == 0 || r.exit_code == 2));  // never 1: an input error is exit 2
      accepted += r.exit_code == 0;
      refused += r.exit_code == 2;
      if (r.exit_code == 2) {
        CHECK(test::count_lines(err) == 1);
        CHECK(err.rfind("cpsim: error: ", 0) == 0);
        CHECK(out.empty());
      }
    }
  }
  MESSAGE(accepted << " lines ran, " << refused << " were refused");
  CHECK(accepted > 0);
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
