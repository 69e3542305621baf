// A program run as a child process in bounded time, that leaves nothing behind: what `cpsim judge` runs (the build,
// the judge) and what the tests run (cpsim itself).
//
//   1. fork; the child gets a process group of its own, dies with this process (PR_SET_PDEATHSIG), and execs argv
//   2. this process waits, with SIGINT, SIGTERM and SIGHUP blocked and taken as they come (sigtimedwait), until
//      the child exits, the time limit passes, or one of those signals arrives
//   3. on the limit or a signal: SIGTERM to the child's whole group, SIGKILL after a grace of 2 s; and whatever the
//      end, SIGKILL to anything left in the group, so no grandchild outlives the run
//   4. and SIGKILL to every descendant that left the group (setsid(), setpgid()): each carries a token of this run in
//      the environment it started with ($CPSIM_SUPERVISOR, /proc/PID/environ), and while the run lasts this process
//      is a child subreaper (PR_SET_CHILD_SUBREAPER), so an orphaned descendant is reparented here and reaped. (A
//      descendant that execs itself with an environment cleared of the token, or outlives a SIGKILL of this process,
//      is beyond this: only a cgroup would hold it.)
// The fork, the signals and the reaping are the supervisor's (forked_children.hpp).
// The child may report what it is doing, one line at a time, on a pipe (progress): tell_parent() in the child; the
// last line comes back in ChildResult::progress (the judge names the case it was judging when it crashed).
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cpsim {

struct ChildOptions {
  std::chrono::milliseconds time_limit{0};  // 0: none
  bool progress = false;                    // a pipe for tell_parent() (its fd in $CPSIM_PROGRESS_FD)
  std::vector<std::pair<std::string, std::string>> env;  // set in the child
  std::string cwd;                                       // the child's working folder (empty: this one's)
  std::string stdin_path, stdout_path, stderr_path;      // redirections (empty: inherited)
  bool stdout_to_stderr = false;                         // the child's stdout is this process's stderr
  std::int64_t file_size_limit = -1;                     // RLIMIT_FSIZE in bytes (with SIGXFSZ ignored); -1: none
  std::int64_t address_space_limit = -1;                 // RLIMIT_AS in bytes; -1: none
  std::function<void(int pid)> started;                  // called once the child is forked (tests signal it)
};

struct ChildResult {
  int exit_code = -1;      // when it exited
  int signal = 0;          // the signal that ended it (0: it exited)
  bool timed_out = false;  // ended because the time limit passed
  int interrupted = 0;     // SIGINT, SIGTERM or SIGHUP received by this process (and passed on), else 0
  std::string progress;    // the last line the child told
  std::optional<int> told_end;  // the exit code the child declared it ends with (tell_parent_end), if it did
  double seconds = 0;      // how long it ran
  bool group_left = false; // processes of its group were still there when it ended (and were killed)
  int strays = 0;          // descendants outside its group still there when it ended (and killed)
  std::int64_t peak_rss_bytes = 0;  // the child's VmHWM (peak resident memory), sampled every 20 ms while it ran
};

// Runs argv[0] (found on PATH) with argv. Error when it cannot be started.
ChildResult run_child(const std::vector<std::string>& argv, const ChildOptions& options = {});

// In a child started with progress: writes `line` and a newline to the parent's pipe; nothing otherwise.
void tell_parent(const std::string& line);
// In a child started with progress: declares that it ends now, of its own accord, with exit code `code`. An exit
// without it (a stray exit() in code the child runs) is then told apart from the program's own end: the exit status
// alone cannot tell them.
void tell_parent_end(int code);

// "SIGSEGV (a segmentation fault: a read or write outside the memory the program holds)", "SIGTERM", "signal 42".
std::string signal_words(int signal);

}  // namespace cpsim
