// `cpsim judge` bounded: any file judged with --file, a hang stopped at --time-limit, SIGTERM passed on, a crash or
// an abort named with its case and signal, and no judge process left behind in any of these; an exit(0) in the
// learner's code is no pass, a runaway allocation meets the judge's memory limit, and a process the learner's code
// starts in a session of its own (setsid) does not outlive the judge.
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "run_cli.hpp"
#include "sim/os/child_process.hpp"

using namespace cpsim;
using cpsim::test::slurp;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

const std::string kCpsim = std::string(CPSIM_BINARY_DIR) + "/cpsim";
const fs::path kDir = fs::path(CPSIM_BINARY_DIR) / "tests";
const fs::path kHanging = kDir / "judge_cmd.hanging";  // written by a hanging judge once it is inside a case

// A learner's file that gets the chunk order right and then, in the forward, does what CPSIM_TEST_JUDGE asks:
// hang (after writing the file CPSIM_TEST_JUDGE_MARK names, so that a test knows a case is being judged), abort,
// segfault, exit(0), reserve 6 GiB (no page touched: only an address-space limit refuses it), or start a process in
// a session of its own (setsid) that writes its pid into the mark and sleeps, holding the judge's output open.
const char* kMisbehaving = R"(#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "exercises/zigzag_ring/exercise.hpp"

namespace cpsim::exercise {
std::vector<int> zigzag_chunks(int rank, int ranks) { return {rank, 2 * ranks - 1 - rank}; }
void zigzag_ring_forward(Communicator&, Device&, const SeqLayout&, const Buffer&, const Buffer&, const Buffer&,
                         const Buffer&, const Buffer&, double) {
  const char* mode = std::getenv("CPSIM_TEST_JUDGE");
  const std::string m = mode ? mode : "";
  if (m == "abort") std::abort();
  if (m == "segv") std::raise(SIGSEGV);
  if (m == "exit0") std::exit(0);
  if (m == "memory") std::vector<char>().reserve(std::size_t{6} << 30);
  if (m == "setsid") {
    const char* mark = std::getenv("CPSIM_TEST_JUDGE_MARK");
    if (::fork() == 0) {
      ::setsid();
      std::ofstream(std::string(mark) + ".tmp") << ::getpid() << "\n";
      std::rename((std::string(mark) + ".tmp").c_str(), mark);
      for (;;) ::pause();
    }
    while (!std::ifstream(mark)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return;  // the case fails: nothing was computed
  }
  if (const char* mark = std::getenv("CPSIM_TEST_JUDGE_MARK")) std::ofstream(mark) << "hanging\n";
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}
}  // namespace cpsim::exercise
)";

// Processes running a judge built by --file (their executable is judge_zigzag_ring_file).
int judges_running() {
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::error_code ec;
    const fs::path exe = fs::read_symlink(e.path() / "exe", ec);
    if (!ec && exe.filename() == "judge_zigzag_ring_file") ++n;
  }
  return n;
}

struct Judged {
  ChildResult r;
  std::string out, err, mark;
};

Judged judge(const std::vector<std::string>& args, const std::string& mode, std::function<void(int)> started = {}) {
  std::vector<std::string> argv{kCpsim, "judge", "zigzag_ring"};
  argv.insert(argv.end(), args.begin(), args.end());
  ChildOptions o;
  const std::string out = (kDir / "judge_cmd.stdout").string(), err = (kDir / "judge_cmd.stderr").string();
  o.stdout_path = out;
  o.stderr_path = err;
  o.time_limit = 600s;
  // A sanitizer's own handler would report the segfault and exit 1: let the signal end the judge, as it would.
  o.env = {{"CPSIM_TEST_JUDGE", mode},
           {"CPSIM_TEST_JUDGE_MARK", kHanging.string()},
           {"ASAN_OPTIONS", "handle_segv=0:handle_abort=0:detect_leaks=0"},
           {"TSAN_OPTIONS", "handle_segv=0:handle_abort=0"}};
  o.started = std::move(started);
  fs::remove(kHanging);
  Judged j{run_child(argv, o), slurp(out), slurp(err), slurp(kHanging.string())};
  fs::remove(out);
  fs::remove(err);
  fs::remove(kHanging);
  return j;
}

}  // namespace

TEST_CASE("cpsim judge --file judges any file: the reference solution, copied, passes") {
  const std::string solution = std::string(CPSIM_SOURCE_DIR) + "/exercises/zigzag_ring/solution/zigzag_ring.cpp";
  const Judged j = judge({"--file", solution}, "");
  CHECK(j.r.exit_code == 0);
  CHECK(j.out.find("Judging zigzag_ring: " + std::string(CPSIM_BINARY_DIR) + "/exercises/zigzag_ring/judged.cpp") !=
        std::string::npos);
  CHECK(j.out.find("All 8 checks passed") != std::string::npos);
}

TEST_CASE("cpsim judge stops a judge that hangs, crashes or aborts, names the case, and leaves no process") {
  const fs::path file = kDir / "judge_misbehaving.cpp";
  std::ofstream(file) << kMisbehaving;
  const std::string first_case = "C=1 S=8 B=1 Nq=2 Nkv=2 D=4";

  SUBCASE("past --time-limit") {
    const Judged j = judge({"--file", file.string(), "--time-limit", "2"}, "hang");
    CHECK(j.r.exit_code == 1);
    // The last line of stderr (the build's output comes before it).
    const std::string last = j.err.substr(j.err.rfind('\n', j.err.size() - 2) + 1);
    CHECK(last == "cpsim: judge: zigzag_ring did not finish within 2 s (--time-limit) while judging " + first_case +
                      "; look for a loop that never ends, or a rank waiting for a message no rank sends\n");
  }
  SUBCASE("on SIGTERM to cpsim judge") {
    std::thread killer;
    const Judged j = judge({"--file", file.string()}, "hang", [&](int pid) {
      killer = std::thread([pid] {
        // Once the judge is inside its first case (however slow the machine is to build and start it).
        for (int i = 0; i < 60000 && !fs::exists(kHanging); ++i) std::this_thread::sleep_for(10ms);
        ::kill(pid, SIGTERM);
      });
    });
    killer.join();
    CHECK(j.r.exit_code == 128 + SIGTERM);
    CHECK(j.err.find("cpsim: judge: the judge of zigzag_ring while judging " + first_case +
                     " stopped by SIGTERM; its processes are gone") != std::string::npos);
  }
  SUBCASE("an abort") {
    const Judged j = judge({"--file", file.string()}, "abort");
    CHECK(j.r.exit_code == 1);
    CHECK(j.err.find("crashed with SIGABRT (an abort") != std::string::npos);
    CHECK(j.err.find("while judging " + first_case) != std::string::npos);
  }
  SUBCASE("a segfault") {
    const Judged j = judge({"--file", file.string()}, "segv");
    CHECK(j.r.exit_code == 1);
    CHECK(j.err.find("crashed with SIGSEGV (a segmentation fault") != std::string::npos);
    CHECK(j.err.find("while judging " + first_case) != std::string::npos);
  }
  CHECK(judges_running() == 0);
  fs::remove(file);
}

namespace {
// Whether a process is running (a zombie waiting for its reaper is not).
bool running(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  int id = 0;
  std::string name;
  char state = 0;
  return static_cast<bool>(f >> id >> name >> state) && state != 'Z' && state != 'X';
}
}  // namespace

TEST_CASE("cpsim judge fails an exit(0) in the learner's code, limits its memory, and leaves no process it started") {
  const fs::path file = kDir / "judge_misbehaving2.cpp";
  std::ofstream(file) << kMisbehaving;
  const std::string first_case = "C=1 S=8 B=1 Nq=2 Nkv=2 D=4";

  SUBCASE("exit(0) in a rank function is no pass") {
    const Judged j = judge({"--file", file.string()}, "exit0");
    CHECK(j.r.exit_code == 1);
    const std::string last = j.err.substr(j.err.rfind('\n', j.err.size() - 2) + 1);
    CHECK(last == "cpsim: judge: zigzag_ring exited with code 0 while judging " + first_case +
                      " before the judge reached its verdict, so nothing passed; look for a call to exit() in your "
                      "file and return from the function instead\n");
  }
  SUBCASE("a 6 GiB allocation fails at the judge's address-space limit") {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    MESSAGE("no address-space limit under a sanitizer (cmd_judge.cpp)");
#else
    const Judged j = judge({"--file", file.string()}, "memory");
    CHECK(j.r.exit_code == 1);
    CHECK(j.out.find("FAIL  " + first_case) != std::string::npos);
    CHECK(j.out.find("std::bad_alloc") != std::string::npos);
#endif
  }
  SUBCASE("a process in a session of its own is killed with the judge") {
    const auto t0 = std::chrono::steady_clock::now();
    const Judged j = judge({"--file", file.string(), "--time-limit", "60"}, "setsid");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(j.r.exit_code == 1);  // the case failed: nothing computed
    CHECK(j.r.strays == 0);     // cpsim judge left nothing for this test's own supervisor to kill
    CHECK(seconds < 300);       // not held until the time limit of this test's run (600 s)
    REQUIRE(!j.mark.empty());
    CHECK(!running(std::stoi(j.mark)));
  }
  CHECK(judges_running() == 0);
  fs::remove(file);
}

TEST_CASE("cpsim judge refuses what it cannot judge in one line with exit code 2") {
  const std::vector<std::pair<std::string, std::string>> cases{
      {"judge zigzag_ring --time-limit 0", "--time-limit 0 is too small"},
      {"judge zigzag_ring --time-limit 1e300", "--time-limit 1e+300 is too large"},
      {"judge zigzag_ring --file /no/such.cpp", "--file /no/such.cpp is not a file"},
      {"judge zigzag_ring --solution --file x.cpp", "--solution and --file each name the file to judge"},
      {"judge zigzag_ring --file 'a\nb.cpp'", "--file names a path with a line break in it"},
      {"judge zigzag_ring extra", "unexpected argument 'extra'; cpsim judge takes 1 such argument"},
  };
  for (const auto& [args, says] : cases) {
    CAPTURE(args);
    const auto r = cpsim::test::run_cli(args, "judge_refuses");
    CHECK(r.rc == 2);
    CHECK(cpsim::test::count_lines(r.err) == 1);
    CHECK(r.err.find(says) != std::string::npos);
  }
}
