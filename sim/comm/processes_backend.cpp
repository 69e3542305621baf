#include "sim/comm/processes_backend.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <mutex>
#include <optional>

#include "sim/comm/backend_registry.hpp"
#include "sim/comm/launch_support.hpp"
#include "sim/comm/p2p_communicator.hpp"
#include "sim/comm/rank_binding.hpp"
#include "sim/comm/shm_engine.hpp"
#include "sim/comm/shm_heap.hpp"
#include "sim/comm/shm_segment.hpp"
#include "sim/comm/wait_policy.hpp"
#include "sim/core/bytes.hpp"
#include "sim/os/forked_children.hpp"

namespace cpsim {
namespace {

// How a rank process ends: its rank function returned (and its result was handed over), it failed (and recorded
// why in the segment), or it stopped because another rank failed.
constexpr int kExitOk = 0;
constexpr int kExitFailed = 70;
constexpr int kExitStopped = 71;
// After a failure, ranks busy computing (not waiting) get this long to notice before they are killed.
constexpr auto kGrace = std::chrono::milliseconds(1000);
// How often the launcher looks for children that exited, when neither a result chunk nor SIGCHLD wakes it earlier.
constexpr auto kReapEvery = std::chrono::microseconds(5000);

const Envelope kResultEnvelope{kControlContext, Channel::control, CollectiveKind::none, 0, 0};

class ProcessCommunicator final : public P2pCommunicator {
 public:
  ProcessCommunicator(ShmEngine& engine, int rank, Recorder& rec, std::vector<int> world_ranks, std::uint64_t context)
      : P2pCommunicator(rank, static_cast<int>(world_ranks.size()), rec, world_ranks, context), engine_(engine) {}
  std::string backend() const override { return "processes"; }

 protected:
  // With a heap, direct at every size: each message goes by reference and its receiver copies it once, straight
  // out of the sender's input, so one round of C-1 copies at once beats C-1 chained steps of the ring, which
  // copy what another core has just written (4 ranks on 2 cores: direct faster at every chunk from 128 KiB to
  // 16 MiB, all_gather and reduce_scatter; docs/performance/comm.md, "Ring or direct"). Without one the rings
  // carry the bytes: direct while C-1 messages at once stream through them without filling them (a chunk of at
  // most a quarter of a ring: 512 KiB at C = 4), the ring for larger chunks, where one message per neighbour at a
  // time keeps the rings flowing.
  CollectiveAlgorithm backend_algorithm(std::size_t chunk_bytes) const override {
    if (engine_.world().arena_size() > 0) return CollectiveAlgorithm::direct;
    const std::size_t ring_bytes = ShmWorld::slots_per_ring(engine_.world().ranks(), 0) * kSlotBytes;
    return chunk_bytes <= ring_bytes / 4 ? CollectiveAlgorithm::direct : CollectiveAlgorithm::ring;
  }
  Pending start_send(const Envelope& env, const void* buf, std::size_t bytes, int peer_world) override {
    return engine_.send(env, buf, bytes, peer_world);
  }
  Pending start_recv(const Envelope& env, void* buf, std::size_t bytes, int peer_world, const Landing& how) override {
    return engine_.recv(env, buf, bytes, peer_world, how);
  }
  std::unique_ptr<P2pCommunicator> make_sub(int rank, std::vector<int> world_ranks, std::uint64_t context) override {
    return std::make_unique<ProcessCommunicator>(engine_, rank, recorder(), std::move(world_ranks), context);
  }

 private:
  ShmEngine& engine_;
};

// SIGINT / SIGTERM while a launch runs: remember the signal; the launcher stops every rank, restores the old
// handlers and raises it again. A signal the process was started ignoring (SIG_IGN: a background job's SIGINT,
// nohup) stays ignored, in the launcher and in its ranks, as a shell's job control expects.
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int sig) {
  g_stop_signal = sig;
}

// SIGCHLD while a launch runs rings the launcher's doorbell, so that a rank's exit is reaped at once rather than at the
// next kReapEvery tick (the last rank's exit is on the run's critical path). Ringing is a lock-free atomic add and a
// futex wake: both async-signal-safe.
std::atomic<Doorbell*> g_child_bell{nullptr};
extern "C" void on_child_exit(int) {
  const int saved = errno;
  if (Doorbell* bell = g_child_bell.load()) bell->ring();
  errno = saved;
}

class StopSignals {
 public:
  static constexpr int kSignals[] = {SIGINT, SIGTERM};
  explicit StopSignals(Doorbell& launcher_bell) {
    g_stop_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    for (std::size_t i = 0; i < std::size(kSignals); ++i) {
      sigaction(kSignals[i], nullptr, &old_[i]);
      taken_[i] = old_[i].sa_handler != SIG_IGN;
      if (taken_[i]) sigaction(kSignals[i], &sa, nullptr);
    }
    // SIGCHLD: only where nobody else handles it (its default is to be ignored), and never SA_NOCLDWAIT's auto-reaping.
    sigaction(SIGCHLD, nullptr, &old_child_);
    child_taken_ = old_child_.sa_handler == SIG_DFL && !(old_child_.sa_flags & SA_SIGINFO);
    if (child_taken_) {
      g_child_bell.store(&launcher_bell);
      struct sigaction sc {};
      sc.sa_handler = on_child_exit;
      sigemptyset(&sc.sa_mask);
      sc.sa_flags = SA_RESTART | SA_NOCLDSTOP;
      sigaction(SIGCHLD, &sc, nullptr);
    }
  }
  ~StopSignals() { restore(); }
  void restore() {
    if (restored_) return;
    for (std::size_t i = 0; i < std::size(kSignals); ++i)
      if (taken_[i]) sigaction(kSignals[i], &old_[i], nullptr);
    if (child_taken_) {
      sigaction(SIGCHLD, &old_child_, nullptr);
      g_child_bell.store(nullptr);
    }
    restored_ = true;
  }
  // In a rank process: the default action for the signals the launcher took over; ignored ones stay ignored.
  void reset_in_rank() const {
    for (std::size_t i = 0; i < std::size(kSignals); ++i)
      if (taken_[i]) std::signal(kSignals[i], SIG_DFL);
    if (child_taken_) {
      std::signal(SIGCHLD, SIG_DFL);
      g_child_bell.store(nullptr);
    }
  }

 private:
  struct sigaction old_[std::size(kSignals)]{};
  bool taken_[std::size(kSignals)] = {};
  struct sigaction old_child_ {};
  bool child_taken_ = false;
  bool restored_ = false;
};

void flush_output() {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
}

// The body of a rank process. Never returns.
[[noreturn]] void run_rank(const ShmSegment& segment, const ShmWorld& world, int r, const LaunchOptions& opt,
                           const RankFn& fn, Recorder::Clock::time_point epoch, const StopSignals& signals,
                           const std::vector<int>& cpus) {
  signals.reset_in_rank();  // (the supervisor made it die with the launcher: forked_children.hpp)
  int code = kExitOk;
  // Every rank starts once the launcher has forked the last: C ranks on fewer cores would otherwise slow the
  // launcher's later forks, and the last ranks would start their work late (a few ms each).
  for (;;) {
    const std::uint32_t seen = world.bell(r).seq.load();
    if (world.control().forked.load() != 0 || world.aborted()) break;
    world.bell(r).sleep(seen, std::chrono::milliseconds(1));
  }
  const RankBinding binding(r, cpus);  // on its CPU from here on (LaunchOptions::bind)
  std::optional<RankArena> arena;
  try {
    // This rank's message buffers come from its arena of the shared heap (shm_heap.hpp) for as long as the process
    // lives. The pages it will write, its rings' slots and its arena, are backed and mapped first, by this rank while
    // its peers do theirs (rather than by the launcher for all, or a fault per 4 KiB on first touch): a /dev/shm
    // that ran out is an error here, never a SIGBUS later (shm_segment.hpp).
    const ShmWorld::Pages rings = ShmWorld::rings_of(r, world.ranks(), world.arena_size());
    if (const int err = segment.populate(static_cast<std::byte*>(segment.data()) + rings.offset, rings.bytes))
      throw Error("its message rings could not be backed: " +
                  ShmSegment::shortage(rings.bytes, "this rank's message rings", err));
    if (world.arena_size() > 0) {
      if (const int err = segment.populate(world.arena(r), world.arena_size()))
        throw Error("its arena of the shared heap could not be backed: " +
                    ShmSegment::shortage(world.arena_size(), "this rank's buffers", err));
      arena.emplace(world.arena(r), world.arena_size());
      install_host_arena(&*arena);
    }
    ShmEngine engine(world, r, opt.timeout);
    Recorder rec(r, opt.tracing);
    rec.set_epoch(epoch);
    std::string result;
    {
      ProcessCommunicator comm(engine, r, rec, rank_range(0, world.ranks()), kWorldContext);
      comm.impose(opt.collectives);
      result = fn(comm);
    }
    // Every message of this rank is in the rings by now: others may stop waiting for more.
    world.set_status(r, ShmStatus::finished);
    world.ring_all();
    // The result and the counters go to the launcher (endpoint C): their size, then the bytes.
    ByteWriter w;
    put_outcome(w, result, rec);
    const std::string payload = w.take();
    const std::uint64_t n = payload.size();
    Pending size = engine.send(kResultEnvelope, &n, sizeof n, world.ranks());
    Pending body = engine.send(kResultEnvelope, payload.data(), n, world.ranks());
    wait(size);
    wait(body);
    // Nobody reads this rank's buffers any more (its sends completed or were revoked when its requests went): their
    // pages go back now, while other ranks may still compute, rather than all at once when the launcher unmaps the
    // segment after the last rank. Nothing allocates from the arena after this.
    if (world.arena_size() > 0) ::madvise(world.arena(r), world.arena_size(), MADV_REMOVE);
  } catch (const Aborted&) {
    world.set_status(r, ShmStatus::stopped);
    code = kExitStopped;
  } catch (const std::exception& e) {
    world.fail(r, encoded(e));  // its fixes apart, for the program to word (error.hpp)
    code = kExitFailed;
  } catch (...) {
    world.fail(r, "threw an exception that is not a std::exception");
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
  Launcher(const ShmWorld& world, ShmEngine& engine, std::vector<Child>& children, ForkedChildren& procs)
      : world_(world), engine_(engine), children_(children), procs_(procs) {}

  // Collects results and exits until every child is reaped.
  void supervise(StopSignals& signals) {
    for (int r = 0; r < procs_.size(); ++r) {
      Child& c = children_[r];
      if (!procs_.reaped(r)) c.size_recv = engine_.recv(kResultEnvelope, &c.size, sizeof c.size, r);
    }
    std::optional<std::chrono::steady_clock::time_point> abort_seen;
    while (!procs_.all_reaped()) {
      const std::uint32_t seen = world_.bell(world_.ranks()).seq.load();
      collect_results();
      reap_exited();
      if (const int sig = g_stop_signal) {
        procs_.kill_all();
        signals.restore();
        ::raise(sig);
        throw Error("interrupted by " + signal_name(sig) + "; every rank was stopped");
      }
      if (world_.aborted()) {
        const auto now = std::chrono::steady_clock::now();
        if (!abort_seen) abort_seen = now;
        if (now - *abort_seen > kGrace) procs_.kill_all();  // ranks still computing never looked
      }
      if (procs_.all_reaped()) break;  // the last rank was reaped just now: no sleep (its SIGCHLD rang before `seen`)
      world_.bell(world_.ranks()).sleep(seen, kReapEvery);
    }
    collect_results();
  }

 private:
  void collect_results() {
    while (engine_.progress()) {
    }
    for (int r = 0; r < world_.ranks(); ++r) {
      Child& c = children_[r];
      try {
        if (c.size_recv && c.size_recv->test()) {
          c.size_recv.reset();
          c.body.resize(c.size);
          c.body_recv = engine_.recv(kResultEnvelope, c.body.data(), c.size, r);
        }
        if (c.body_recv && c.body_recv->test()) {
          c.body_recv.reset();
          c.has_result = true;
        }
      } catch (const Error& e) {
        world_.fail(r, std::string("its result could not be collected: ") + e.what(), ShmStatus::dead);
      }
    }
  }

  void reap_exited() {
    for (int r = 0; r < procs_.size(); ++r) {
      const std::optional<ChildExit> end = procs_.poll(r);
      if (!end || procs_.killed(r)) continue;
      if (end->signal) {
        world_.fail(r, end->words(), ShmStatus::dead);
      } else {
        const int code = end->code;
        const Child& c = children_[r];
        if (code == kExitOk) {
          collect_results();  // its last chunks may still sit in the ring
          if (!c.has_result) world_.fail(r, "exited (code 0) before its rank function returned", ShmStatus::dead);
        } else if (code == kExitFailed) {
          if (world_.control().failed_rank.load() < 0) world_.fail(r, "failed", ShmStatus::dead);
        } else if (code != kExitStopped) {
          world_.fail(r, "exited with code " + std::to_string(code) + " before its rank function returned",
                      ShmStatus::dead);
        }
      }
    }
  }

  const ShmWorld& world_;
  ShmEngine& engine_;
  std::vector<Child>& children_;
  ForkedChildren& procs_;
};

}  // namespace

std::vector<RankOutcome> launch_processes(const LaunchOptions& opt, const RankFn& fn) {
  static std::mutex one_at_a_time;  // the signal handlers and the children belong to one launch
  std::lock_guard guard(one_at_a_time);
  const int c = opt.ranks;
  // One segment: the rings, and a heap of an arena per rank for the buffers the ranks send from and receive into.
  const std::size_t arena = arena_bytes(opt.heap_bytes);
  ShmSegment segment(ShmWorld::bytes_needed(c, arena));
  // The launcher backs what it lays out before it writes any of it (shm_world.hpp: all before the heap but the
  // rings' slots); each rank backs its own rings' slots and its arena (run_rank).
  for (const ShmWorld::Pages& pg : ShmWorld::launcher_pages(c, arena))
    if (const int err = segment.populate(static_cast<std::byte*>(segment.data()) + pg.offset, pg.bytes))
      throw UsageError(ShmSegment::shortage(ShmWorld::heap_offset(c, arena), "its message rings", err));
  const ShmWorld world(segment.data(), c, arena, true);
  ShmEngine engine(world, c, opt.timeout);  // the launcher's endpoint: receives results
  std::vector<Child> children(c);
  StopSignals signals(world.bell(c));
  const auto epoch = Recorder::Clock::now();
  const std::vector<int> cpus = cpus_to_bind(opt.bind);
  ForkedChildren procs;  // whatever happens here, no rank outlives launch()
  ForkOptions fork_options;
  fork_options.orphan_code = kExitStopped;
  for (int r = 0; r < c; ++r) {
    const auto rank = [&, r]() -> int { run_rank(segment, world, r, opt, fn, epoch, signals, cpus); };
    if (procs.start(rank, fork_options) < 0) {
      world.fail(r, std::string("could not be started: fork failed: ") + std::strerror(errno), ShmStatus::dead);
      break;
    }
  }
  world.control().forked.store(1);
  world.ring_all();
  Launcher(world, engine, children, procs).supervise(signals);
  if (world.control().failed_rank.load() >= 0) throw rank_failure(world.control().failed_rank.load(), world.failure());

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
