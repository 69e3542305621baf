#include "sim/os/output_folder.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>

#include "sim/core/error.hpp"

namespace cpsim {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPartial = ".cpsim-partial-";
constexpr int kStops[] = {SIGINT, SIGTERM, SIGHUP};

// One folder at a time takes the stop signals (a command writes one dump).
volatile std::sig_atomic_t g_stop = 0;
struct sigaction g_old[std::size(kStops)];
bool g_taken[std::size(kStops)] = {};

extern "C" void on_stop(int sig) {
  g_stop = sig;
}

void take_signals() {
  g_stop = 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a write under way goes on; the signal is looked at between files
  for (std::size_t i = 0; i < std::size(kStops); ++i) {
    sigaction(kStops[i], nullptr, &g_old[i]);
    g_taken[i] = g_old[i].sa_handler != SIG_IGN;  // an ignored signal (nohup, a background job) stays ignored
    if (g_taken[i]) sigaction(kStops[i], &sa, nullptr);
  }
}

void restore_signals() {
  for (std::size_t i = 0; i < std::size(kStops); ++i)
    if (g_taken[i]) sigaction(kStops[i], &g_old[i], nullptr);
  for (bool& t : g_taken) t = false;
}

// Ends the process by the signal it got while the folder was written, now that nothing of it is left.
void raise_again() {
  const int sig = g_stop;
  if (sig == 0) return;
  g_stop = 0;
  ::raise(sig);
}

sigset_t stop_set() {
  sigset_t s;
  sigemptyset(&s);
  for (int sig : kStops) sigaddset(&s, sig);
  return s;
}

fs::path folder_path(const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // "out/" -> "out"
  return p;
}

}  // namespace

std::string OutputFolder::temporary_for(const std::string& dir, long pid) {
  const fs::path p = folder_path(dir);
  return (p.parent_path() / ("." + p.filename().string() + kPartial + std::to_string(pid))).string();
}

namespace {

// Removes the temporaries in `where` named prefix + PID whose process is gone (killed by SIGKILL while it wrote):
// nobody will finish them.
void remove_stale(const fs::path& where, const std::string& prefix) {
  std::error_code ec;
  for (fs::directory_iterator it(where, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string pid = name.substr(prefix.size());
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos || pid.size() > 9) continue;
    if (::kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH) {
      std::error_code ignored;
      fs::remove_all(it->path(), ignored);
    }
  }
}

bool make_folder(const std::string& path, std::error_code& ec) {
  fs::remove_all(path, ec);  // this process's own, left by an earlier folder that could not remove it
  return fs::create_directory(path, ec) && !ec;
}

}  // namespace

OutputFolder::OutputFolder(std::string dir) : dir_(folder_path(dir).string()), temp_(temporary_for(dir_, ::getpid())) {
  const fs::path p(dir_);
  const fs::path parent = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  remove_stale(parent, "." + p.filename().string() + kPartial);
  remove_stale(p, kPartial);
  std::error_code ec;
  if (!make_folder(temp_, ec) && fs::is_directory(p)) {
    // DIR's folder is not writable but DIR is: the temporary goes inside it, DIR/.cpsim-partial-PID.
    inside_ = true;
    temp_ = (p / (kPartial + std::to_string(::getpid()))).string();
    make_folder(temp_, ec);
  }
  if (ec) throw Error("cannot create the folder " + temp_ + " (to write " + dir_ + " in): " + ec.message());
  take_signals();
}

OutputFolder::~OutputFolder() {
  if (!done_) remove_temporary();
  restore_signals();
  raise_again();  // a stop signal that came while it was written (and the folder is gone or complete)
}

std::string OutputFolder::file(const std::string& name) const {
  return (fs::path(temp_) / name).string();
}

void OutputFolder::remove_temporary() {
  std::error_code ec;
  fs::remove_all(temp_, ec);
}

void OutputFolder::check_interrupted() {
  if (g_stop == 0) return;
  const int sig = g_stop;
  remove_temporary();
  done_ = true;
  restore_signals();
  raise_again();
  throw Error("interrupted by signal " + std::to_string(sig) + " while writing " + dir_ + "; nothing was left of it");
}

void OutputFolder::commit() {
  check_interrupted();
  // The stop signals wait until the files are in place: a folder is never left half moved.
  const sigset_t stops = stop_set();
  sigset_t old;
  ::pthread_sigmask(SIG_BLOCK, &stops, &old);
  auto fail = [&](const std::string& what, int err) {
    remove_temporary();
    done_ = true;
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    throw Error("cannot move the files into " + dir_ + " (" + what + ": " + std::strerror(err) + ")");
  };
  // A new folder, or an empty one, is replaced in one step.
  if (inside_ || ::rename(temp_.c_str(), dir_.c_str()) != 0) {
    if (!inside_ && errno != ENOTEMPTY && errno != EEXIST) fail("rename " + temp_, errno);
    std::error_code ec;
    for (fs::directory_iterator it(temp_, ec), end; !ec && it != end; it.increment(ec)) {
      const fs::path to = fs::path(dir_) / it->path().filename();
      if (::rename(it->path().c_str(), to.c_str()) != 0) fail("rename " + it->path().string(), errno);
    }
    if (ec) fail("list " + temp_, ec.value());
    remove_temporary();
  }
  done_ = true;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);  // a signal held off arrives now, at the handler
}

}  // namespace cpsim
