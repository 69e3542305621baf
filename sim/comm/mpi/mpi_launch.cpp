// launch_mpi(): this process is one rank of a job that mpirun (or srun) started; every rank runs fn, then the
// outcomes travel to rank 0, which returns them all. The other ranks return an empty vector (and print nothing).
//
//   mpirun -np 4 cpsim run --backend mpi --ranks 4 ...
//
// 1. Check the world: started by a launcher, with as many processes as --ranks (UsageError otherwise, on every
//    rank alike: the command line reporting it is rank 0's).
// 2. A communicator of this launch's own (MPI_Comm_dup of the world): launches never see each other's messages.
// 3. A common time origin: every rank starts its Recorder's clock as it leaves a barrier.
// 4. Run fn. A rank that throws says why on stderr and calls MPI_Abort, which ends every process of the job;
//    mpirun then reports the abort and exits non-zero (2 for a usage error, 1 otherwise).
// 5. Gather: every rank's result and Recorder, serialised (ByteWriter), to rank 0 in rank order.
//
// Also here: the MPI side of run_on_rank0() and broadcast_from_rank0() (launcher.hpp), and the registration.
#include "sim/comm/mpi/mpi_launch.hpp"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "sim/comm/backend_registry.hpp"
#include "sim/comm/launch_support.hpp"
#include "sim/comm/mpi/mpi_communicator.hpp"
#include "sim/core/bytes.hpp"

namespace cpsim {
namespace {

constexpr int kResultTag = 1;
constexpr std::size_t kPiece = std::size_t{1} << 30;  // results travel in pieces MPI's int counts can hold

UsageError not_launched(int ranks) {
  const std::string C = std::to_string(ranks);
  return UsageError("--backend mpi with --ranks " + C + " needs " + C +
                        " processes started by mpirun, but this process was not started by an MPI launcher",
                    {Fix{{}, "run it as `mpirun -np " + C + " cpsim ... --backend mpi --ranks " + C + "`"},
                     Fix{{"--backend threads"}}});
}

bool native_reductions() {
  const char* v = std::getenv("CPSIM_MPI_REDUCTIONS");
  const std::string s = v ? v : "";
  if (s.empty() || s == "ring") return false;
  if (s == "native") return true;
  throw UsageError("CPSIM_MPI_REDUCTIONS=" + s +
                   " is not a reduction order; use ring (the default: bitwise the other backends' results) or "
                   "native (MPI_Reduce_scatter_block and MPI_Allreduce)");
}

// Ends the job: this rank's reason on stderr, then MPI_Abort (every process of the job stops).
[[noreturn]] void abort_job(int rank, const std::string& what, int code) {
  std::fprintf(stderr, "cpsim: %s (ending the MPI job)\n", rank_failure(rank, what).what());
  std::fflush(stderr);
  std::fflush(stdout);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

// STEP 5: every rank's payload on rank 0, in rank order (empty elsewhere).
std::vector<std::string> gather_to_rank0(MPI_Comm comm, int rank, int size, const std::string& payload,
                                         mpi::Watchdog& dog) {
  std::vector<unsigned long long> sizes(size);
  const unsigned long long mine = payload.size();
  mpi::Watch w(dog, mpi::Call{"gathering the results to rank 0", -1, -1, -1, size});
  mpi::check(MPI_Gather(&mine, 1, MPI_UNSIGNED_LONG_LONG, sizes.data(), 1, MPI_UNSIGNED_LONG_LONG, 0, comm),
             "gathering result sizes");
  std::vector<std::string> all;
  if (rank != 0) {
    for (std::size_t at = 0; at < payload.size(); at += kPiece)
      mpi::check(MPI_Send(payload.data() + at, static_cast<int>(std::min(kPiece, payload.size() - at)), MPI_BYTE, 0,
                          kResultTag, comm),
                 "sending a result to rank 0");
    return all;
  }
  all.push_back(payload);
  for (int p = 1; p < size; ++p) {
    std::string got(sizes[p], '\0');
    for (std::size_t at = 0; at < got.size(); at += kPiece)
      mpi::check(MPI_Recv(got.data() + at, static_cast<int>(std::min(kPiece, got.size() - at)), MPI_BYTE, p, kResultTag,
                          comm, MPI_STATUS_IGNORE),
                 "receiving rank " + std::to_string(p) + "'s result");
    all.push_back(std::move(got));
  }
  return all;
}

}  // namespace

std::vector<RankOutcome> launch_mpi(const LaunchOptions& opt, const RankFn& fn) {
  // STEP 1: the world.
  if (!mpi::launcher_env().launched() && opt.ranks > 1) throw not_launched(opt.ranks);
  const bool native = native_reductions();
  mpi::ensure_initialized();
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size == 1 && opt.ranks > 1) throw not_launched(opt.ranks);
  require(size == opt.ranks,
          "--ranks " + std::to_string(opt.ranks) + " disagrees with the MPI job: mpirun started " +
              std::to_string(size) + " processes (one rank each)",
          Fix{{"--ranks " + std::to_string(size) + ", or mpirun -np " + std::to_string(opt.ranks)},
              "start it with mpirun -np " + std::to_string(opt.ranks)});

  // STEP 2: this launch's communicator, and the watchdog over its blocking calls.
  auto dog = std::make_shared<mpi::Watchdog>(rank, opt.timeout);
  MPI_Comm comm = MPI_COMM_NULL;
  {
    mpi::Watch w(*dog, mpi::Call{"MPI_Comm_dup of the world (every rank must launch)", -1, -1, -1, size});
    mpi::check(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup");
  }

  Recorder rec(rank, opt.tracing);
  std::vector<std::string> payloads;
  try {
    mpi::MpiCommunicator world(comm, rec, rank_range(0, size), dog, native);
    // STEP 3: the clocks' common origin.
    {
      mpi::Watch w(*dog, mpi::Call{"the barrier that starts the run", -1, -1, -1, size});
      mpi::check(MPI_Barrier(comm), "MPI_Barrier");
    }
    rec.set_epoch(Recorder::Clock::now());
    // STEP 4: the rank's work.
    const std::string result = fn(world);
    ByteWriter w;
    put_outcome(w, result, rec);
    payloads = gather_to_rank0(comm, rank, size, w.take(), *dog);
  } catch (const UsageError& e) {
    // The job ends here, in the rank, below the program that would word the fix: what() names every flag under its
    // own (cpsim run's) name. The usage errors a program can foresee are thrown before the launch, and it words them.
    abort_job(rank, e.what(), 2);
  } catch (const std::exception& e) {
    abort_job(rank, e.what(), 1);
  } catch (...) {
    abort_job(rank, "threw an exception that is not a std::exception", 1);
  }
  std::vector<RankOutcome> out;
  for (int r = 0; r < static_cast<int>(payloads.size()); ++r) {
    ByteReader rd(payloads[r]);
    out.push_back(get_outcome(r, rd));
  }
  return out;
}

namespace {

// Waits for req, polling once a millisecond: MPI's own blocking wait would spin, taking the cores from rank 0.
void wait_idle(MPI_Request& req, const char* what) {
  for (int done = 0;;) {
    mpi::check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), what);
    if (done) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace

void mpi_broadcast_from_rank0(std::string& bytes) {
  mpi::ensure_initialized();
  unsigned long long n = bytes.size();
  MPI_Request req;
  mpi::check(MPI_Ibcast(&n, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD, &req), "MPI_Ibcast");
  wait_idle(req, "broadcasting from rank 0");
  bytes.resize(n);
  mpi::check(MPI_Ibcast(bytes.data(), mpi::count_of(n, "a broadcast"), MPI_BYTE, 0, MPI_COMM_WORLD, &req),
             "MPI_Ibcast");
  wait_idle(req, "broadcasting from rank 0");
}

void mpi_run_on_rank0(const std::function<void()>& fn) {
  mpi::ensure_initialized();
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::exception_ptr failure;
  if (rank == 0) {
    try {
      fn();
    } catch (...) {
      failure = std::current_exception();
    }
  }
  // Everyone meets at a barrier, polled idly: the waiting processes leave rank 0 the cores it measures on.
  MPI_Request req;
  mpi::check(MPI_Ibarrier(MPI_COMM_WORLD, &req), "MPI_Ibarrier");
  wait_idle(req, "waiting for rank 0");
  if (failure) std::rethrow_exception(failure);
}

CPSIM_BACKEND(mpi) {
  info.backend = Backend::mpi;
  info.device = "cpu";
  info.job_ranks = true;
  info.launch = launch_mpi;
  info.run_on_rank0 = mpi_run_on_rank0;
  info.broadcast_from_rank0 = mpi_broadcast_from_rank0;
}

}  // namespace cpsim
