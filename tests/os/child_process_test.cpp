// A child process in bounded time: its exit code or signal, the time limit, its last progress line, and nothing of
// its process group left behind.
#include "sim/os/child_process.hpp"

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

TEST_CASE("a descendant that leaves the child's group and session (setsid) is killed too, not left running") {
  const std::string mark =
      (std::filesystem::temp_directory_path() / ("cpsim_setsid_" + std::to_string(::getpid()))).string();
  std::remove(mark.c_str());
  ChildOptions o;
  o.progress = true;
  o.env = {{"MARK", mark}};
  // The shell starts a grandchild in a session of its own (setsid: a group of its own too) that writes its pid and
  // would sleep a minute; once the pid is there, the shell tells it and exits.
  const ChildResult r = run_child({"sh", "-c",
                                   "setsid sh -c 'echo $$ > \"$MARK\"; exec sleep 60' & "
                                   "while [ ! -s \"$MARK\" ]; do sleep 0.01; done; "
                                   "cat \"$MARK\" >&$CPSIM_PROGRESS_FD; exit 0"},
                                  o);
  std::remove(mark.c_str());
  CHECK(r.exit_code == 0);
  REQUIRE(!r.progress.empty());
  CHECK(!r.group_left);  // it was not in the group
  CHECK(r.strays == 1);
  CHECK(gone(std::stoi(r.progress)));
  CHECK(r.seconds < 30);
}

TEST_CASE("a child's declared end comes back, and an exit without one is told apart") {
  ChildOptions o;
  o.progress = true;
  // tell_parent_end's line, as the C++ helper writes it.
  const ChildResult told = run_child({"sh", "-c", "printf '\\036end 0\\n' >&$CPSIM_PROGRESS_FD; exit 0"}, o);
  CHECK(told.exit_code == 0);
  CHECK(told.told_end == 0);
  CHECK(told.progress.empty());  // the end is no progress line
  const ChildResult silent = run_child({"sh", "-c", "echo 'case 1' >&$CPSIM_PROGRESS_FD; exit 0"}, o);
  CHECK(silent.exit_code == 0);
  CHECK(!silent.told_end.has_value());
  CHECK(silent.progress == "case 1");
}
