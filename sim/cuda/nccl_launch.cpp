// launch_nccl(): one process per GPU, NCCL between them.
//
// One machine (no launcher environment): the calling process forks C ranks; rank r uses GPU r. Rank 0 makes the
// NCCL id and puts it in a shared-memory block mapped before the fork; the others wait for it there. Each rank
// sends its result and Recorder back through its own pipe. The parent supervises: a rank that fails, crashes or
// exits early fails the run, and the others (likely blocked in NCCL, waiting for it) are killed after a grace period.
// CUDA may not be used in a forked child of a process that has used it, so the parent must not have touched the
// GPU (the probe runs in a child process of its own: probe.cpp).
//
// Under mpirun or srun (several processes, one per GPU, possibly on several machines): this process is one rank
// (nccl_env.hpp); every rank runs fn, then the outcomes travel to rank 0 over NCCL itself.
#include <nccl.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <thread>

#include "sim/comm/backend_registry.hpp"
#include "sim/comm/launch_support.hpp"
#include "sim/core/bytes.hpp"
#include "sim/cuda/cuda_check.hpp"
#include "sim/cuda/launchers.hpp"
#include "sim/cuda/nccl_comm.hpp"
#include "sim/cuda/nccl_env.hpp"
#include "sim/cuda/probe.hpp"
#include "sim/os/forked_children.hpp"

namespace cpsim {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kExitOk = 0, kExitFailed = 70;
constexpr auto kGrace = std::chrono::seconds(3);
constexpr char kRecordOk = 'o', kRecordFailed = 'f', kRecordStopped = 's';

// A rank that gave up because another rank failed first: that one is reported, not this.
struct Stopped : Error {
  using Error::Error;
};

// Mapped shared before the fork.
struct SharedBlock {
  std::atomic<int> id_ready{0};
  std::atomic<int> failed{0};
  ncclUniqueId id;
};

void write_all(int fd, const std::string& s) {
  std::size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

void require_gpus(int ranks) {
  int n = 0;
  cuda::check(cudaGetDeviceCount(&n), "counting GPUs");
  if (n < ranks)
    throw UsageError("--backend nccl runs one rank per GPU: " + std::to_string(ranks) + " ranks need " +
                         std::to_string(ranks) + " GPUs, but " + std::to_string(n) + " are visible",
                     {Fix{{"--ranks " + std::to_string(n) + " or fewer",
                           "--backend cuda-threads (every rank on one GPU)"}}});
}

// The body of rank r, in a process of its own (it dies with the launcher: forked_children.hpp). Never returns.
[[noreturn]] void run_rank(int r, const LaunchOptions& opt, const RankFn& fn, SharedBlock* shared, int fd,
                           Recorder::Clock::time_point epoch) {
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  int code = kExitOk;
  try {
    require_gpus(opt.ranks);
    auto gpu = std::make_shared<cuda::RankGpu>(r, r, opt.timeout);
    cuda::RankGpu::set_current(gpu);
    if (r == 0) {
      cuda::nccl_check(ncclGetUniqueId(&shared->id), "rank 0: ncclGetUniqueId");
      shared->id_ready.store(1, std::memory_order_release);
    } else {
      const auto deadline = Clock::now() + opt.timeout;
      while (shared->id_ready.load(std::memory_order_acquire) == 0) {
        if (shared->failed.load() != 0) throw Stopped("stopped: another rank failed before NCCL started");
        if (Clock::now() > deadline) throw Error("waited for rank 0's NCCL id until the timeout");
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    ncclComm_t comm = nullptr;
    cuda::nccl_check(ncclCommInitRank(&comm, opt.ranks, shared->id, r),
                     "rank " + std::to_string(r) + ": ncclCommInitRank");
    Recorder rec(r, opt.tracing);
    rec.set_epoch(epoch);
    std::string result;
    {
      cuda::NcclCommunicator world(comm, r, opt.ranks, rec, rank_range(0, opt.ranks), gpu);
      result = fn(world);
    }
    gpu->wait(gpu->compute(), "finishing compute");
    cuda::RankGpu::set_current(nullptr);
    ByteWriter w;
    w.put(kRecordOk);
    put_outcome(w, result, rec);
    write_all(fd, w.take());
  } catch (const Stopped& e) {
    ByteWriter w;
    w.put(kRecordStopped);
    w.put(std::string(e.what()));
    write_all(fd, w.take());
    code = kExitFailed;
  } catch (const std::exception& e) {
    shared->failed.store(1);
    ByteWriter w;
    w.put(kRecordFailed);
    w.put(encoded(e));  // its fixes apart, for the program to word (error.hpp)
    write_all(fd, w.take());
    code = kExitFailed;
  }
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  ::_exit(code);
}

// A rank's pipe and what came through it. (The process itself is the supervisor's: forked_children.hpp.)
struct Child {
  bool started = false;
  int fd = -1;
  bool closed = false;
  std::string record;
};

std::string death_text(const ChildExit& e) {
  return e.signal ? e.words() : e.words() + " before its rank function returned";
}

std::vector<RankOutcome> launch_forked(const LaunchOptions& opt, const RankFn& fn) {
  if (cuda::cuda_used())
    throw Error(
        "--backend nccl starts its ranks with fork(), and CUDA does not survive a fork once a process has "
        "used it; start the nccl run from a fresh process (one cpsim command per nccl run)");
  const GpuProbe probe = probe_gpus();
  if (!probe.problem.empty()) throw probe_error(probe, "--backend nccl: ");
  const int c = opt.ranks;
  require(static_cast<int>(probe.gpus.size()) >= c,
          "--backend nccl runs one rank per GPU: " + std::to_string(c) + " ranks need " + std::to_string(c) +
              " GPUs, but " + std::to_string(probe.gpus.size()) + " are visible",
          Fix{{"--ranks " + std::to_string(probe.gpus.size()) + " or fewer",
               "--backend cuda-threads (every rank on one GPU)"}});
  void* mem = ::mmap(nullptr, sizeof(SharedBlock), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) throw Error(std::string("shared memory for the NCCL id: ") + std::strerror(errno));
  auto* shared = new (mem) SharedBlock();
  std::vector<Child> children(c);
  const auto epoch = Recorder::Clock::now();
  ForkedChildren procs;  // whatever happens here, no rank outlives the launch
  int first_failed = -1;
  std::string failure;
  auto fail = [&](int r, const std::string& what) {
    if (first_failed < 0) {
      first_failed = r;
      failure = what;
    }
  };
  for (int r = 0; r < c; ++r) {
    int fds[2];
    if (::pipe(fds) != 0) {
      fail(r, std::string("could not be started: pipe failed: ") + std::strerror(errno));
      break;
    }
    ForkOptions fork_options;
    fork_options.orphan_code = kExitFailed;
    const int started = procs.start(
        [&, r]() -> int {
          ::close(fds[0]);
          for (int q = 0; q < r; ++q) ::close(children[q].fd);
          run_rank(r, opt, fn, shared, fds[1], epoch);
        },
        fork_options);
    ::close(fds[1]);
    if (started < 0) {
      ::close(fds[0]);
      fail(r, std::string("could not be started: fork failed: ") + std::strerror(errno));
      break;
    }
    children[r].started = true;
    children[r].fd = fds[0];
  }
  if (first_failed >= 0) shared->failed.store(1);

  // Supervise: read every pipe to its end, reap every child; after a failure, kill the rest after a grace period.
  std::optional<Clock::time_point> failed_at;
  if (first_failed >= 0) failed_at = Clock::now();
  auto all_done = [&] {
    for (int r = 0; r < procs.size(); ++r)
      if (!procs.reaped(r) || !children[r].closed) return false;
    return true;
  };
  while (!all_done()) {
    std::vector<pollfd> fds;
    for (const Child& ch : children)
      if (ch.started && !ch.closed) fds.push_back(pollfd{ch.fd, POLLIN, 0});
    if (!fds.empty())
      ::poll(fds.data(), fds.size(), 50);
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (Child& ch : children) {
      if (!ch.started || ch.closed) continue;
      pollfd p{ch.fd, POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0) continue;
      char buf[65536];
      const ssize_t n = ::read(ch.fd, buf, sizeof buf);
      if (n > 0)
        ch.record.append(buf, static_cast<std::size_t>(n));
      else if (n == 0 || errno != EINTR) {
        ch.closed = true;
        ::close(ch.fd);
      }
    }
    for (int r = 0; r < procs.size(); ++r) {
      const std::optional<ChildExit> end = procs.poll(r);
      if (!end || procs.killed(r)) continue;
      const bool ok = end->ok();
      if (!ok && !(end->signal == 0 && end->code == kExitFailed)) fail(r, death_text(*end));
      if (!ok && !failed_at) {
        shared->failed.store(1);
        failed_at = Clock::now();
      }
    }
    for (int r = 0; r < c; ++r)  // a failure record names the cause
      if (!children[r].record.empty() && children[r].record[0] == kRecordFailed && children[r].closed) {
        ByteReader rd(children[r].record);
        rd.get<char>();
        fail(r, rd.get<std::string>());
      }
    if (failed_at && Clock::now() - *failed_at > kGrace)
      for (int r = 0; r < procs.size(); ++r)
        if (!procs.killed(r)) procs.kill(r, SIGKILL);
  }
  shared->~SharedBlock();
  ::munmap(mem, sizeof(SharedBlock));
  if (first_failed >= 0) throw rank_failure(first_failed, failure);

  std::vector<RankOutcome> out(c);
  for (int r = 0; r < c; ++r) {
    if (children[r].record.empty() || children[r].record[0] != kRecordOk)
      throw rank_failure(r, r < procs.size() && procs.reaped(r) ? death_text(procs.exit(r)) : "sent no result");
    ByteReader rd(children[r].record);
    rd.get<char>();
    out[r] = get_outcome(r, rd);
  }
  return out;
}

// This process is one rank of a job started by mpirun or srun.
std::vector<RankOutcome> launch_external(const LaunchOptions& opt, const RankFn& fn, const cuda::JobEnv& env) {
  require(env.size == opt.ranks,
          "the launcher started " + std::to_string(env.size) + " processes but --ranks is " + std::to_string(opt.ranks),
          "start one process per rank (mpirun -np " + std::to_string(opt.ranks) + " / srun -n " +
              std::to_string(opt.ranks) + ")");
  const GpuProbe probe = probe_gpus();
  if (!probe.problem.empty()) throw probe_error(probe, "rank " + std::to_string(env.rank) + ": ");
  const int gpus = static_cast<int>(probe.gpus.size());
  const int device = env.local_rank >= 0 ? env.local_rank : env.rank % gpus;
  if (device >= gpus)
    throw UsageError("rank " + std::to_string(env.rank) + " is local rank " + std::to_string(device) +
                     " but its machine has " + std::to_string(gpus) + " visible GPUs; start at most " +
                     std::to_string(gpus) + " processes per machine");
  auto gpu = std::make_shared<cuda::RankGpu>(device, env.rank, opt.timeout);
  cuda::RankGpu::set_current(gpu);
  const ncclUniqueId id = cuda::job_nccl_id(env, opt.timeout);
  ncclComm_t comm = nullptr;
  cuda::nccl_check(ncclCommInitRank(&comm, opt.ranks, id, env.rank),
                   "rank " + std::to_string(env.rank) + ": ncclCommInitRank");
  Recorder rec(env.rank, opt.tracing);
  std::vector<RankOutcome> out;
  {
    cuda::NcclCommunicator world(comm, env.rank, opt.ranks, rec, rank_range(0, opt.ranks), gpu);
    std::string result = fn(world);
    ByteWriter w;
    put_outcome(w, result, rec);
    const std::vector<std::string> all = cuda::gather_to_rank0(world, w.take());
    for (int r = 0; r < static_cast<int>(all.size()); ++r) {
      ByteReader rd(all[r]);
      out.push_back(get_outcome(r, rd));
    }
  }
  cuda::RankGpu::set_current(nullptr);
  return out;
}

}  // namespace

std::vector<RankOutcome> launch_nccl(const LaunchOptions& opt, const RankFn& fn) {
  require(opt.ranks >= 1, "the number of ranks must be at least 1 (got " + std::to_string(opt.ranks) + ")",
          Fix{{"--ranks 1 or more"}});
  const cuda::JobEnv env = cuda::job_env();
  if (env.external) return launch_external(opt, fn, env);
  return launch_forked(opt, fn);
}

CPSIM_BACKEND(nccl) {
  info.backend = Backend::nccl;
  info.device = "cuda";
  info.launch = launch_nccl;
}

}  // namespace cpsim
