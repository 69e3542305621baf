// The one supervisor of child processes: every process cpsim forks is started, signalled, waited for and reaped
// here (the processes backend's and the nccl backend's ranks, the GPU probe, and run_child's programs: the judge,
// the build, the tests' cpsim).
//
//   start(body)   flushes this process's output (a child must not inherit unwritten output), then forks; the child
//                 dies with this process (PR_SET_PDEATHSIG: SIGKILL), optionally leads a process group of its own,
//                 runs body() and _exits with its value (no destructor or atexit handler of this process's state
//                 runs in the child; an exception out of body() ends it with exit code kThrew)
//   poll / wait   reap a child that exited; how it ended in words: "exited with code 3", "crashed with SIGSEGV
//                 (signal 11)", "killed by SIGKILL (signal 9)"
//   kill          a signal to one child (or its group); kill_all to every child not reaped yet
//   ~             SIGKILL to every child not reaped yet (its group too, when it has one), then reaps them all:
//                 whatever happens to the supervisor (an exception, a signal taken as an error), no child outlives it
// Between fork and body() only async-signal-safe calls are made, so a parent with other threads (holding the
// allocator's lock) may fork; body() itself decides what it may call (exec at once, or run on: the ranks do, in a
// process whose threads other than the one that forked are gone).
#pragma once
#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace cpsim {

// The exit code of a child whose body() let an exception out.
constexpr int kThrew = 125;

// How a child ended, from waitpid's status.
struct ChildExit {
  int code = -1;   // its exit code, when it exited
  int signal = 0;  // the signal that ended it (0: it exited)
  static ChildExit from_status(int wait_status);
  bool ok() const { return signal == 0 && code == 0; }
  // "exited with code 3"; a fault "crashed with SIGSEGV (signal 11)" (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT,
  // SIGTRAP, SIGSYS); any other signal "killed by SIGTERM (signal 15)".
  std::string words() const;
};

// "SIGSEGV (signal 11)".
std::string signal_name(int signal);

struct ForkOptions {
  bool own_group = false;  // the child leads a process group of its own (kill() then signals the whole group)
  int orphan_code = 127;   // the child's exit code when this process died before the child set PR_SET_PDEATHSIG
};

class ForkedChildren {
 public:
  ForkedChildren() = default;
  ~ForkedChildren();
  ForkedChildren(const ForkedChildren&) = delete;
  ForkedChildren& operator=(const ForkedChildren&) = delete;

  // Forks a child that runs body() (body never returns to the caller's code: its value is the exit code). Returns
  // the child's index (0, 1, ... in the order started), or -1 with errno set when fork failed.
  int start(const std::function<int()>& body, const ForkOptions& options = {});

  int size() const { return static_cast<int>(children_.size()); }
  pid_t pid(int i) const { return children_[i].pid; }
  bool reaped(int i) const { return children_[i].reaped; }
  bool all_reaped() const;
  // The child was signalled by kill() or kill_all() (its end is the supervisor's doing, not its own).
  bool killed(int i) const { return children_[i].killed; }
  // How child i ended; only once reaped.
  const ChildExit& exit(int i) const { return children_[i].exit; }

  // Reaps child i if it has exited: its end, else nullopt (also when reaped before).
  std::optional<ChildExit> poll(int i);
  // Reaps child i, waiting for it as long as it takes (kill it first to bound that).
  ChildExit wait(int i);
  // `signal` to child i (to its group when it has one, reaching its descendants there); nothing once reaped.
  void kill(int i, int signal);
  // SIGKILL to every child not reaped yet, then reaps them.
  void kill_all();

 private:
  struct Child {
    pid_t pid = 0;
    bool own_group = false, reaped = false, killed = false;
    ChildExit exit;
  };
  std::vector<Child> children_;
};

}  // namespace cpsim
