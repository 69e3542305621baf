#include "sim/os/child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <mutex>
#include <set>

#include "sim/core/error.hpp"
#include "sim/os/forked_children.hpp"

namespace cpsim {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kGrace = std::chrono::seconds(2);
constexpr int kPollMs = 20;
// The variable that marks every descendant of a run_child (its tokens, colon-separated: runs inside runs).
constexpr const char* kTokenKey = "CPSIM_SUPERVISOR";
// The line tell_parent_end writes before the code (a control character, so no progress line a child tells is one).
constexpr const char* kEndMark = "\x1e" "end ";

sigset_t stop_signals() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGINT);
  sigaddset(&s, SIGTERM);
  sigaddset(&s, SIGHUP);
  return s;
}

// What the child execs, made before the fork: between fork and exec only async-signal-safe calls are made (the
// parent may have other threads, holding the allocator's lock).
struct Exec {
  std::vector<std::string> strings;  // argv, then "KEY=VALUE" entries
  std::vector<char*> argv, envp;
};

Exec prepare(const std::vector<std::string>& argv, const ChildOptions& o, int progress_fd, const std::string& token) {
  Exec e;
  std::vector<std::string> env;
  std::vector<std::string> keys;
  for (const auto& [k, v] : o.env) keys.push_back(k);
  if (progress_fd >= 0) keys.push_back("CPSIM_PROGRESS_FD");
  keys.push_back(kTokenKey);
  for (char** p = ::environ; *p; ++p) {
    const std::string entry(*p);
    bool replaced = false;
    for (const std::string& k : keys) replaced = replaced || entry.rfind(k + "=", 0) == 0;
    if (!replaced) env.push_back(entry);
  }
  for (const auto& [k, v] : o.env) env.push_back(k + "=" + v);
  if (progress_fd >= 0) env.push_back("CPSIM_PROGRESS_FD=" + std::to_string(progress_fd));
  const char* outer = std::getenv(kTokenKey);  // a run inside a run: the outer supervisor's tokens stay
  env.push_back(std::string(kTokenKey) + "=" + (outer ? std::string(outer) + ":" : "") + token);
  e.strings = argv;
  e.strings.insert(e.strings.end(), env.begin(), env.end());
  for (std::size_t i = 0; i < e.strings.size(); ++i) (i < argv.size() ? e.argv : e.envp).push_back(e.strings[i].data());
  e.argv.push_back(nullptr);
  e.envp.push_back(nullptr);
  return e;
}

[[noreturn]] void exec_child(const Exec& x, const ChildOptions& o, const sigset_t& old_mask, int progress_fd,
                             int err_fd) {
  auto die = [&](const char* what) {
    const int e = errno;
    (void)!::write(err_fd, &e, sizeof e);
    (void)!::write(err_fd, what, std::strlen(what));
    ::_exit(127);
  };
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) ::signal(s, SIG_DFL);
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  auto redirect = [&](const std::string& path, int fd, int flags) {
    if (path.empty()) return;
    const int f = ::open(path.c_str(), flags, 0644);
    if (f < 0 || ::dup2(f, fd) < 0) die(path.c_str());
    ::close(f);
  };
  redirect(o.stdin_path, 0, O_RDONLY);
  redirect(o.stdout_path, 1, O_WRONLY | O_CREAT | O_TRUNC);
  redirect(o.stderr_path, 2, O_WRONLY | O_CREAT | O_TRUNC);
  if (o.stdout_to_stderr && ::dup2(2, 1) < 0) die("stdout");
  if (!o.cwd.empty() && ::chdir(o.cwd.c_str()) != 0) die(o.cwd.c_str());
  if (o.file_size_limit >= 0) {
    ::signal(SIGXFSZ, SIG_IGN);  // a write past the limit then fails with EFBIG instead of killing the child
    const rlimit r{static_cast<rlim_t>(o.file_size_limit), static_cast<rlim_t>(o.file_size_limit)};
    if (::setrlimit(RLIMIT_FSIZE, &r) != 0) die("RLIMIT_FSIZE");
  }
  if (o.address_space_limit >= 0) {
    const rlimit r{static_cast<rlim_t>(o.address_space_limit), static_cast<rlim_t>(o.address_space_limit)};
    if (::setrlimit(RLIMIT_AS, &r) != 0) die("RLIMIT_AS");
  }
  if (progress_fd >= 0 && ::fcntl(progress_fd, F_SETFD, 0) != 0) die("the progress pipe");
  ::execvpe(x.argv[0], x.argv.data(), x.envp.data());
  die(x.argv[0]);
  ::_exit(127);
}

// Reads what the child told so far: keeps the last complete line in res.progress, an end it declared in
// res.told_end.
void drain(int fd, std::string& partial, ChildResult& res) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return;
    partial.append(buf, static_cast<std::size_t>(n));
    for (std::size_t nl; (nl = partial.find('\n')) != std::string::npos; partial.erase(0, nl + 1)) {
      const std::string line = partial.substr(0, nl);
      if (line.rfind(kEndMark, 0) == 0)
        res.told_end = std::atoi(line.c_str() + std::strlen(kEndMark));
      else
        res.progress = line;
    }
  }
}

// While a run_child is under way this process is a child subreaper (PR_SET_CHILD_SUBREAPER): a descendant of its
// child whose parent ends (one that left the child's group with setsid(), say) becomes this process's child
// rather than init's, so the sweep below can reap it once it is killed. Counted, as several threads may run children.
class Subreaper {
 public:
  Subreaper() {
    std::lock_guard lk(mutex_);
    if (count_++ == 0) {
      int was = 0;
      ::prctl(PR_GET_CHILD_SUBREAPER, &was);
      was_ = was != 0;
      if (!was_) ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    }
  }
  ~Subreaper() {
    std::lock_guard lk(mutex_);
    if (--count_ == 0 && !was_) ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  }

 private:
  static inline std::mutex mutex_;
  static inline int count_ = 0;
  static inline bool was_ = false;
};

// Whether the environment the process `pid` started with (/proc/PID/environ: NUL-separated KEY=VALUE entries) holds
// `token` in the variable kTokenKey (colon-separated tokens).
bool carries(pid_t pid, const std::string& token) {
  const int fd = ::open(("/proc/" + std::to_string(pid) + "/environ").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::string env;
  char buf[8192];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) env.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  const std::string key = std::string(kTokenKey) + "=";
  for (std::size_t at = 0; at < env.size();) {
    const std::size_t end = std::min(env.find('\0', at), env.size());
    if (env.compare(at, key.size(), key) == 0) {
      const std::string value = ":" + env.substr(at + key.size(), end - at - key.size()) + ":";
      return value.find(":" + token + ":") != std::string::npos;
    }
    at = end + 1;
  }
  return false;
}

// Kills every process that carries `token` (the child's descendants, wherever they went: another process group, a
// session of their own) and reaps those that became this process's children, in at most ~2 s. Returns how many.
int sweep(const std::string& token) {
  std::set<pid_t> killed, ever;
  const pid_t self = ::getpid();
  for (int round = 0; round < 100; ++round) {
    bool found = false;
    if (DIR* d = ::opendir("/proc")) {
      while (const dirent* e = ::readdir(d)) {
        char* end = nullptr;
        const long pid = std::strtol(e->d_name, &end, 10);
        if (*end != '\0' || pid <= 0 || pid == self || !carries(static_cast<pid_t>(pid), token)) continue;
        ::kill(static_cast<pid_t>(pid), SIGKILL);
        killed.insert(static_cast<pid_t>(pid));
        ever.insert(static_cast<pid_t>(pid));
        found = true;
      }
      ::closedir(d);
    }
    for (auto it = killed.begin(); it != killed.end();) {
      int status = 0;
      ::waitpid(*it, &status, WNOHANG);  // ours (reparented here): reaped; another's: its parent reaps it
      it = ::kill(*it, 0) != 0 && errno == ESRCH ? killed.erase(it) : std::next(it);
    }
    if (!found && killed.empty()) break;
    ::poll(nullptr, 0, kPollMs);
  }
  return static_cast<int>(ever.size());
}

// A token no other run_child of any process shares: this process's pid, a count, the clock.
std::string new_token() {
  static std::atomic<unsigned> count{0};
  return std::to_string(::getpid()) + "." + std::to_string(count++) + "." +
         std::to_string(Clock::now().time_since_epoch().count());
}

// The process's VmHWM (its peak resident memory since its exec), 0 when it cannot be read.
std::int64_t peak_rss(pid_t pid) {
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/status").c_str(), "r");
  if (!f) return 0;
  char line[256];
  long long kib = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmHWM: %lld kB", &kib) == 1) break;
  std::fclose(f);
  return static_cast<std::int64_t>(kib) * 1024;
}

}  // namespace

ChildResult run_child(const std::vector<std::string>& argv, const ChildOptions& o) {
  if (argv.empty()) throw Error("run_child: no program to run");
  const Subreaper subreaper;
  const sigset_t stops = stop_signals();
  sigset_t old_mask;
  ::pthread_sigmask(SIG_BLOCK, &stops, &old_mask);
  int progress[2] = {-1, -1}, err[2] = {-1, -1};
  if (o.progress && ::pipe2(progress, O_CLOEXEC) != 0) throw Error("run_child: pipe: " + std::string(std::strerror(errno)));
  if (::pipe2(err, O_CLOEXEC) != 0) throw Error("run_child: pipe: " + std::string(std::strerror(errno)));
  if (o.progress) ::fcntl(progress[0], F_SETFL, O_NONBLOCK);

  const int progress_fd = o.progress ? progress[1] : -1;  // the pipe's write end, kept open across the exec
  const std::string token = new_token();
  const Exec x = prepare(argv, o, progress_fd, token);
  const auto t0 = Clock::now();
  ForkedChildren children;
  ForkOptions fork_options;
  fork_options.own_group = true;
  const int child = children.start([&]() -> int { exec_child(x, o, old_mask, progress_fd, err[1]); }, fork_options);
  if (child < 0) throw Error("run_child: fork: " + std::string(std::strerror(errno)));
  const pid_t pid = children.pid(child);
  ::close(err[1]);
  if (o.started) o.started(pid);
  if (o.progress) ::close(progress[1]);

  ChildResult res;
  std::string partial;
  std::optional<ChildExit> end;
  auto stop_group = [&](bool grace) {
    children.kill(child, SIGTERM);
    const auto until = Clock::now() + (grace ? kGrace : std::chrono::seconds(0));
    while (!(end = children.poll(child)) && Clock::now() < until) ::poll(nullptr, 0, kPollMs);
    if (!end) {
      children.kill(child, SIGKILL);
      end = children.wait(child);
    }
  };
  // 2. Wait for the end, the limit or a signal.
  while (!end) {
    pollfd p{o.progress ? progress[0] : -1, POLLIN, 0};
    ::poll(&p, o.progress ? 1 : 0, kPollMs);
    if (o.progress) drain(progress[0], partial, res);
    res.peak_rss_bytes = std::max(res.peak_rss_bytes, peak_rss(pid));
    if ((end = children.poll(child))) break;
    const timespec zero{0, 0};
    if (const int sig = ::sigtimedwait(&stops, nullptr, &zero); sig > 0) {
      res.interrupted = sig;
      stop_group(true);
      break;
    }
    if (o.time_limit.count() > 0 && Clock::now() - t0 >= o.time_limit) {
      res.timed_out = true;
      stop_group(true);
    }
  }
  // 3. Nothing of the child's group outlives it, nor any descendant that left the group.
  res.group_left = ::kill(-pid, 0) == 0;
  if (res.group_left) ::kill(-pid, SIGKILL);
  res.strays = sweep(token);
  if (o.progress) {
    drain(progress[0], partial, res);
    ::close(progress[0]);
  }
  res.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);

  // The child's own report of a failed start.
  int e = 0;
  char what[256] = {};
  const ssize_t got = ::read(err[0], &e, sizeof e);
  const ssize_t len = got == sizeof e ? ::read(err[0], what, sizeof what - 1) : 0;
  ::close(err[0]);
  if (got == sizeof e)
    throw Error("cannot start " + argv[0] + " (" + std::string(what, static_cast<std::size_t>(std::max<ssize_t>(0, len))) +
                ": " + std::strerror(e) + ")");
  res.exit_code = end->code;
  res.signal = end->signal;
  return res;
}

void tell_parent(const std::string& line) {
  static const int fd = [] {
    const char* s = std::getenv("CPSIM_PROGRESS_FD");
    return s ? std::atoi(s) : -1;
  }();
  if (fd < 0) return;
  const std::string text = line + "\n";
  (void)!::write(fd, text.data(), text.size());
}

void tell_parent_end(int code) {
  tell_parent(kEndMark + std::to_string(code));
}

std::string signal_words(int s) {
  switch (s) {
    case SIGSEGV: return "SIGSEGV (a segmentation fault: a read or write outside the memory the program holds)";
    case SIGBUS: return "SIGBUS (a bus error: a misaligned or unmapped access)";
    case SIGABRT: return "SIGABRT (an abort: a failed assertion, or an exception nothing caught)";
    case SIGFPE: return "SIGFPE (an arithmetic fault, such as an integer division by zero)";
    case SIGILL: return "SIGILL (an illegal instruction)";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGPIPE: return "SIGPIPE";
  }
  return "signal " + std::to_string(s);
}

}  // namespace cpsim
