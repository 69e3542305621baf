#include "sim/comm/processes_backend.hpp"

#include <signal.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include "sim/comm/backend_registry.hpp"
#include "sim/comm/launch_support.hpp"
#include "sim/comm/mailbox.hpp"
#include "sim/comm/shm_segment.hpp"
#include "sim/core/bytes.hpp"
#include "sim/os/forked_children.hpp"

namespace cpsim {

std::size_t message_pool_bytes(int ranks, std::size_t heap_bytes, std::size_t shm_free) {
  constexpr std::size_t kLeast = std::size_t{1} << 30, kPage = 4096;
  const std::size_t most = std::numeric_limits<std::size_t>::max() / 8 / static_cast<std::size_t>(ranks);
  const std::size_t want = std::max(kLeast, 4 * static_cast<std::size_t>(ranks) * std::min(heap_bytes, most));
  return std::min(want, shm_free / 2) / kPage * kPage;
}

namespace {

// How a rank process ends: its rank function returned (and its result was handed over), it failed (and recorded
// why in the mailboxes), or it stopped because another rank failed.
constexpr int kExitOk = 0;
constexpr int kExitFailed = 70;
constexpr int kExitStopped = 71;
// After a failure, ranks busy computing (not waiting) get this long to notice before they are killed.
constexpr auto kGrace = std::chrono::milliseconds(1000);
// How often the launcher looks for results and for children that exited.
constexpr auto kLookEvery = std::chrono::milliseconds(1);

const Envelope kResultEnvelope{kControlContext, Channel::control, CollectiveKind::none, 0, 0};

// SIGINT / SIGTERM while a launch runs: remember the signal; the launcher stops every rank, restores the old
// handlers and raises it again. A signal the process was started ignoring (SIG_IGN: a background job's SIGINT,
// nohup) stays ignored, in the launcher and in its ranks, as a shell's job control expects.
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int sig) {
  g_stop_signal = sig;
}

class StopSignals {
 public:
  static constexpr int kSignals[] = {SIGINT, SIGTERM};
  StopSignals() {
    g_stop_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    for (std::size_t i = 0; i < std::size(kSignals); ++i) {
      sigaction(kSignals[i], nullptr, &old_[i]);
      taken_[i] = old_[i].sa_handler != SIG_IGN;
      if (taken_[i]) sigaction(kSignals[i], &sa, nullptr);
    }
  }
  ~StopSignals() { restore(); }
  void restore() {
    if (restored_) return;
    for (std::size_t i = 0; i < std::size(kSignals); ++i)
      if (taken_[i]) sigaction(kSignals[i], &old_[i], nullptr);
    restored_ = true;
  }
  // In a rank process: the default action for the signals the launcher took over; ignored ones stay ignored.
  void reset_in_rank() const {
    for (std::size_t i = 0; i < std::size(kSignals); ++i)
      if (taken_[i]) std::signal(kSignals[i], SIG_DFL);
  }

 private:
  struct sigaction old_[std::size(kSignals)]{};
  bool taken_[std::size(kSignals)] = {};
  bool restored_ = false;
};

void flush_output() {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
}

// The body of a rank process. Never returns.
[[noreturn]] void run_rank(Mailboxes& boxes, int r, const LaunchOptions& opt, const RankFn& fn,
                           Recorder::Clock::time_point epoch, const StopSignals& signals) {
  signals.reset_in_rank();  // (the supervisor made it die with the launcher: forked_children.hpp)
  const int c = boxes.endpoints() - 1;
  int code = kExitOk;
  try {
    Postbox box(boxes, r, opt.timeout);
    Recorder rec(r, opt.tracing);
    rec.set_epoch(epoch);
    std::string result;
    {
      MailboxCommunicator comm(box, "processes", r, rec, rank_range(0, c), kWorldContext);
      comm.impose(opt.collectives);
      result = fn(comm);
    }
    // Every message of this rank is in its receivers' mailboxes by now: others may stop waiting for more.
    boxes.set_status(r, RankStatus::finished);
    // The result and the counters go to the launcher (endpoint C): their size, then the bytes.
    ByteWriter w;
    put_outcome(w, result, rec);
    const std::string payload = w.take();
    const std::uint64_t n = payload.size();
    box.send(kResultEnvelope, &n, sizeof n, c);
    box.send(kResultEnvelope, payload.data(), n, c);
  } catch (const Aborted&) {
    boxes.set_status(r, RankStatus::stopped);
    code = kExitStopped;
  } catch (const std::exception& e) {
    boxes.fail(r, encoded(e));  // its fixes apart, for the program to word (error.hpp)
    code = kExitFailed;
  } catch (...) {
    boxes.fail(r, "threw an exception that is not a std::exception");
    code = kExitFailed;
  }
  flush_output();
  ::_exit(code);  // no destructors or atexit handlers of the parent's state run in the child
}

// A rank process's result, on its way to the launcher. (The process itself is the supervisor's: forked_children.hpp.)
struct Child {
  std::uint64_t size = 0;
  std::string body;
  Pending size_recv, body_recv;
  bool has_result = false;
};

class Launcher {
 public:
  Launcher(Mailboxes& boxes, Postbox& box, std::vector<Child>& children, ForkedChildren& procs)
      : boxes_(boxes), box_(box), children_(children), procs_(procs) {}

  // Collects results and exits until every child is reaped.
  void supervise(StopSignals& signals) {
    for (int r = 0; r < procs_.size(); ++r) {
      Child& c = children_[r];
      if (!procs_.reaped(r)) c.size_recv = box_.recv(kResultEnvelope, &c.size, sizeof c.size, r);
    }
    std::optional<std::chrono::steady_clock::time_point> abort_seen;
    while (!procs_.all_reaped()) {
      collect_results();
      reap_exited();
      if (const int sig = g_stop_signal) {
        procs_.kill_all();
        signals.restore();
        ::raise(sig);
        throw Error("interrupted by " + signal_name(sig) + "; every rank was stopped");
      }
      if (boxes_.aborted()) {
        const auto now = std::chrono::steady_clock::now();
        if (!abort_seen) abort_seen = now;
        if (now - *abort_seen > kGrace) procs_.kill_all();  // ranks still computing never looked
      }
      if (!procs_.all_reaped()) std::this_thread::sleep_for(kLookEvery);
    }
    collect_results();
  }

 private:
  int ranks() const { return static_cast<int>(children_.size()); }

  void collect_results() {
    if (boxes_.aborted()) return;  // the run failed: no result matters (and a dead rank may have held the lock)
    for (int r = 0; r < ranks(); ++r) {
      Child& c = children_[r];
      try {
        if (c.size_recv && c.size_recv->test()) {
          c.size_recv.reset();
          c.body.resize(c.size);
          c.body_recv = box_.recv(kResultEnvelope, c.body.data(), c.size, r);
        }
        if (c.body_recv && c.body_recv->test()) {
          c.body_recv.reset();
          c.has_result = true;
        }
      } catch (const Aborted&) {
        return;  // a rank died holding the mailboxes' lock: reap_exited names it
      } catch (const Error& e) {
        boxes_.fail(r, std::string("its result could not be collected: ") + e.what(), RankStatus::dead);
      }
    }
  }

  void reap_exited() {
    for (int r = 0; r < procs_.size(); ++r) {
      const std::optional<ChildExit> end = procs_.poll(r);
      if (!end || procs_.killed(r)) continue;
      if (end->signal) {
        boxes_.fail(r, end->words(), RankStatus::dead);
      } else {
        const int code = end->code;
        const Child& c = children_[r];
        if (code == kExitOk) {
          collect_results();  // its last messages are in the launcher's mailbox
          if (!c.has_result) boxes_.fail(r, "exited (code 0) before its rank function returned", RankStatus::dead);
        } else if (code == kExitFailed) {
          if (boxes_.first_failed() < 0) boxes_.fail(r, "failed", RankStatus::dead);
        } else if (code != kExitStopped) {
          boxes_.fail(r, "exited with code " + std::to_string(code) + " before its rank function returned",
                      RankStatus::dead);
        }
      }
    }
  }

  Mailboxes& boxes_;
  Postbox& box_;
  std::vector<Child>& children_;
  ForkedChildren& procs_;
};

// /dev/shm's free bytes (0 when it cannot be asked).
std::size_t shm_free_bytes() {
  struct statvfs fs {};
  if (::statvfs("/dev/shm", &fs) != 0) return 0;
  return static_cast<std::size_t>(fs.f_bavail) * fs.f_frsize;
}

}  // namespace

std::vector<RankOutcome> launch_processes(const LaunchOptions& opt, const RankFn& fn) {
  static std::mutex one_at_a_time;  // the signal handlers and the children belong to one launch
  std::lock_guard guard(one_at_a_time);
  const int c = opt.ranks;
  // One segment: the mailboxes of the C ranks and the launcher, then the pool of messages in flight.
  const std::size_t boxes_bytes = (Mailboxes::bytes_needed(c + 1) + 4095) / 4096 * 4096;
  const std::size_t pool_bytes = message_pool_bytes(c, opt.heap_bytes, shm_free_bytes());
  constexpr std::size_t kSmallestPool = std::size_t{1} << 20;
  if (pool_bytes < kSmallestPool)
    throw UsageError(ShmSegment::shortage(boxes_bytes + 2 * kSmallestPool, "its mailboxes and messages", ENOSPC));
  ShmSegment segment(boxes_bytes + pool_bytes);
  if (const int err = segment.populate(segment.data(), boxes_bytes))
    throw UsageError(ShmSegment::shortage(boxes_bytes, "its mailboxes", err));
  RegionPool pool(static_cast<std::byte*>(segment.data()) + boxes_bytes, pool_bytes);
  Mailboxes boxes(segment.data(), c + 1, pool, true);
  Postbox launcher_box(boxes, c, opt.timeout);  // the launcher's endpoint: receives results
  std::vector<Child> children(c);
  StopSignals signals;
  const auto epoch = Recorder::Clock::now();
  ForkedChildren procs;  // whatever happens here, no rank outlives launch()
  ForkOptions fork_options;
  fork_options.orphan_code = kExitStopped;
  for (int r = 0; r < c; ++r) {
    const auto rank = [&, r]() -> int { run_rank(boxes, r, opt, fn, epoch, signals); };
    if (procs.start(rank, fork_options) < 0) {
      boxes.fail(r, std::string("could not be started: fork failed: ") + std::strerror(errno), RankStatus::dead);
      break;
    }
  }
  Launcher(boxes, launcher_box, children, procs).supervise(signals);
  if (boxes.first_failed() >= 0) throw rank_failure(boxes.first_failed(), boxes.failure());

  std::vector<RankOutcome> out(c);
  for (int r = 0; r < c; ++r) {
    ByteReader reader(children[r].body);
    out[r] = get_outcome(r, reader);
  }
  return out;
}

CPSIM_BACKEND(processes) {
  info.backend = Backend::processes;
  info.device = "cpu";
  info.max_ranks = kMaxProcessRanks;
  info.max_ranks_fix = "use fewer ranks, or --backend threads";
  info.launch = launch_processes;
}

}  // namespace cpsim
