#include "sim/os/forked_children.hpp"

#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <iostream>

namespace cpsim {

ChildExit ChildExit::from_status(int status) {
  ChildExit e;
  if (WIFEXITED(status)) e.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) e.signal = WTERMSIG(status);
  return e;
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return std::string("SIG") + (abbrev ? abbrev : "?") + " (signal " + std::to_string(sig) + ")";
}

std::string ChildExit::words() const {
  if (signal == 0) return "exited with code " + std::to_string(code);
  switch (signal) {
    case SIGSEGV:
    case SIGBUS:
    case SIGFPE:
    case SIGILL:
    case SIGABRT:
    case SIGTRAP:
    case SIGSYS:
      return "crashed with " + signal_name(signal);
    default:
      return "killed by " + signal_name(signal);
  }
}

int ForkedChildren::start(const std::function<int()>& body, const ForkOptions& o) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (o.own_group) ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);            // the supervisor dies: so does the child
    if (::getppid() != parent) ::_exit(o.orphan_code);  // it died before the line above
    try {
      ::_exit(body());
    } catch (...) {  // never back into the parent's code, in the child
      ::_exit(kThrew);
    }
  }
  // As the child does: whichever runs first, the group exists before it is signalled. (EACCES once the child has
  // exec'd: then the child made it.)
  if (o.own_group) ::setpgid(pid, pid);
  children_.push_back(Child{pid, o.own_group, false, false, {}});
  return static_cast<int>(children_.size()) - 1;
}

bool ForkedChildren::all_reaped() const {
  for (const Child& c : children_)
    if (!c.reaped) return false;
  return true;
}

std::optional<ChildExit> ForkedChildren::poll(int i) {
  Child& c = children_[i];
  if (c.reaped) return std::nullopt;
  int status = 0;
  pid_t got;
  while ((got = ::waitpid(c.pid, &status, WNOHANG)) < 0 && errno == EINTR) {
  }
  if (got != c.pid) return std::nullopt;
  c.reaped = true;
  c.exit = ChildExit::from_status(status);
  return c.exit;
}

ChildExit ForkedChildren::wait(int i) {
  Child& c = children_[i];
  if (c.reaped) return c.exit;
  int status = 0;
  pid_t got;
  while ((got = ::waitpid(c.pid, &status, 0)) < 0 && errno == EINTR) {
  }
  c.reaped = true;
  if (got == c.pid) c.exit = ChildExit::from_status(status);
  return c.exit;
}

void ForkedChildren::kill(int i, int signal) {
  Child& c = children_[i];
  if (c.reaped) return;
  c.killed = true;
  if (c.own_group) ::kill(-c.pid, signal);
  ::kill(c.pid, signal);  // also when the group is not (yet) there
}

void ForkedChildren::kill_all() {
  for (int i = 0; i < size(); ++i) kill(i, SIGKILL);
  for (int i = 0; i < size(); ++i) wait(i);
}

ForkedChildren::~ForkedChildren() {
  kill_all();
}

}  // namespace cpsim
