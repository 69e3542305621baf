// A child process in bounded time: its exit code or signal, the time limit, its last progress line, and nothing of
// its process group left behind.
#include "sim/core/child_process.hpp"

#include <doctest/doctest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "sim/core/error.hpp"

using namespace cpsim;
using namespace std::chrono_literals;

TEST_CASE("a child's exit code and the signal that ended it come back") {
  CHECK(run_child({"sh", "-c", "exit 3"}).exit_code == 3);
  const ChildResult r = run_child({"sh", "-c", "kill -SEGV $$"});
  CHECK(r.signal == SIGSEGV);
  CHECK(r.exit_code == -1);
  CHECK(signal_words(SIGSEGV).rfind("SIGSEGV (a segmentation fault", 0) == 0);
}

TEST_CASE("a program that cannot be started is an Error naming it") {
  CHECK_THROWS_WITH_AS(run_child({"/no/such/program"}), doctest::Contains("cannot start /no/such/program"), Error);
}

namespace {
// Whether a process is running (a zombie waiting for its reaper is not).
bool running(int pid) {
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (!f) return false;
  int id = 0;
  char name[256] = {}, state = 0;
  const int n = std::fscanf(f, "%d %255s %c", &id, name, &state);
  std::fclose(f);
  return n == 3 && state != 'Z' && state != 'X';
}

// Whether it has stopped running within 2 s.
bool gone(int pid) {
  for (int i = 0; i < 200 && running(pid); ++i) std::this_thread::sleep_for(10ms);
  return !running(pid);
}
}  // namespace

TEST_CASE("past its time limit a child and every process of its group are stopped") {
  ChildOptions o;
  o.time_limit = 300ms;
  o.progress = true;
  // The shell leaves a grandchild in its group, tells its pid, and waits forever.
  const auto t0 = std::chrono::steady_clock::now();
  const ChildResult r = run_child({"sh", "-c", "sleep 60 & echo $! >&$CPSIM_PROGRESS_FD; sleep 60"}, o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(r.timed_out);
  CHECK(r.signal == SIGTERM);
  CHECK(seconds < 5);
  CHECK(gone(std::stoi(r.progress)));
}

TEST_CASE("the child's last progress line comes back") {
  ChildOptions o;
  o.progress = true;
  const ChildResult r =
      run_child({"sh", "-c", "echo starting >&$CPSIM_PROGRESS_FD; echo 'case 2' >&$CPSIM_PROGRESS_FD"}, o);
  CHECK(r.exit_code == 0);
  CHECK(r.progress == "case 2");
}

TEST_CASE("a grandchild a finished child leaves in its group is killed, not orphaned") {
  ChildOptions o;
  o.progress = true;
  const ChildResult r = run_child({"sh", "-c", "sleep 60 & echo $! >&$CPSIM_PROGRESS_FD; exit 0"}, o);
  CHECK(r.exit_code == 0);
  CHECK(r.group_left);
  CHECK(gone(std::stoi(r.progress)));
}

TEST_CASE("a child that ignores SIGTERM is killed after the grace") {
  ChildOptions o;
  o.time_limit = 200ms;
  const ChildResult r = run_child({"sh", "-c", "trap '' TERM; sleep 60"}, o);
  CHECK(r.timed_out);
  CHECK(r.signal == SIGKILL);
  CHECK(r.seconds < 6);
}

TEST_CASE("a child's output can go to files, its input come from one, and its environment be extended") {
  const std::string out =
      (std::filesystem::temp_directory_path() / ("cpsim_child_test_" + std::to_string(::getpid()))).string();
  ChildOptions o;
  o.stdout_path = out;
  o.stdin_path = "/dev/null";
  o.env = {{"CPSIM_CHILD_TEST", "seen"}};
  CHECK(run_child({"sh", "-c", "echo $CPSIM_CHILD_TEST; cat"}, o).exit_code == 0);
  std::FILE* f = std::fopen(out.c_str(), "r");
  REQUIRE(f);
  char buf[16] = {};
  CHECK(std::fgets(buf, sizeof buf, f) != nullptr);
  std::fclose(f);
  std::remove(out.c_str());
  CHECK(std::string(buf) == "seen\n");
}
