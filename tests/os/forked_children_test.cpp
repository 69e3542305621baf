// The supervisor of forked children: exits and signals in words, kill, and no child outliving it.
#include "sim/os/forked_children.hpp"

#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>

using namespace cpsim;
using namespace std::chrono_literals;

namespace {
// Whether a process exists at all (running or a zombie).
bool exists(pid_t pid) {
  return ::kill(pid, 0) == 0;
}

// Whether a process is running (a zombie waiting for its reaper is not).
bool running(pid_t pid) {
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (!f) return false;
  int id = 0;
  char name[256] = {}, state = 0;
  const int n = std::fscanf(f, "%d %255s %c", &id, name, &state);
  std::fclose(f);
  return n == 3 && state != 'Z' && state != 'X';
}
}  // namespace

TEST_CASE("a forked child's exit code and the signal that ended it come back, in words") {
  ForkedChildren procs;
  const int ok = procs.start([] { return 0; });
  const int three = procs.start([] { return 3; });
  const int segv = procs.start([]() -> int {
    ::signal(SIGSEGV, SIG_DFL);
    ::raise(SIGSEGV);
    return 0;
  });
  REQUIRE(ok == 0);
  REQUIRE(three == 1);
  REQUIRE(segv == 2);
  CHECK(procs.wait(ok).ok());
  CHECK(procs.wait(three).code == 3);
  CHECK(procs.exit(three).words() == "exited with code 3");
  const ChildExit crashed = procs.wait(segv);
  CHECK(crashed.signal == SIGSEGV);
  CHECK(crashed.words() == "crashed with SIGSEGV (signal 11)");
  CHECK(ChildExit{-1, SIGTERM}.words() == "killed by SIGTERM (signal 15)");
  CHECK(procs.all_reaped());
  CHECK(!procs.killed(segv));  // it ended by itself
}

TEST_CASE("poll reaps a child once it has exited, and not before") {
  ForkedChildren procs;
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  const int i = procs.start([&]() -> int {
    char c;
    return static_cast<int>(::read(pipe_fds[0], &c, 1));  // waits for the parent's byte: exit code 1
  });
  CHECK(!procs.poll(i).has_value());
  CHECK(!procs.reaped(i));
  REQUIRE(::write(pipe_fds[1], "x", 1) == 1);
  std::optional<ChildExit> end;
  for (int k = 0; k < 500 && !(end = procs.poll(i)); ++k) std::this_thread::sleep_for(10ms);
  REQUIRE(end.has_value());
  CHECK(end->code == 1);
  CHECK(procs.reaped(i));
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
}

TEST_CASE("kill stops a child, and the supervisor's end kills and reaps every child left") {
  pid_t left = 0;
  {
    ForkedChildren procs;
    const int sleeper = procs.start([] {
      ::pause();
      return 0;
    });
    const int other = procs.start([] {
      ::pause();
      return 0;
    });
    procs.kill(sleeper, SIGUSR1);  // (a signal the test runner leaves at its default: the end of the process)
    const ChildExit e = procs.wait(sleeper);
    CHECK(e.signal == SIGUSR1);
    CHECK(procs.killed(sleeper));
    left = procs.pid(other);
    CHECK(exists(left));
  }  // `other` still pauses here
  CHECK(!exists(left));  // killed and reaped: not even a zombie
}

TEST_CASE("a child in a group of its own is killed with its group") {
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  ForkedChildren procs;
  ForkOptions o;
  o.own_group = true;
  const int i = procs.start(
      [&]() -> int {
        const pid_t grandchild = ::fork();  // in the child's group
        if (grandchild == 0) {
          ::pause();
          ::_exit(0);
        }
        (void)!::write(pipe_fds[1], &grandchild, sizeof grandchild);
        ::pause();
        return 0;
      },
      o);
  pid_t grandchild = 0;
  REQUIRE(::read(pipe_fds[0], &grandchild, sizeof grandchild) == sizeof grandchild);
  CHECK(::getpgid(grandchild) == procs.pid(i));
  procs.kill(i, SIGKILL);
  CHECK(procs.wait(i).signal == SIGKILL);
  bool gone = false;  // the grandchild stops running within 2 s (then init, its new parent, reaps it)
  for (int k = 0; k < 200 && !gone; ++k) {
    gone = !running(grandchild);
    if (!gone) std::this_thread::sleep_for(10ms);
  }
  CHECK(gone);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
}

TEST_CASE("an exception out of a child's body ends the child, never returning into the parent's code") {
  ForkedChildren procs;
  const pid_t parent = ::getpid();
  const int i = procs.start([]() -> int { throw std::runtime_error("in the child"); });
  REQUIRE(::getpid() == parent);  // only the parent gets here
  CHECK(procs.wait(i).code == kThrew);
}
