// The processes backend against the definitions of every call (backend_cases.hpp), for C in {1, 2, 3, 4} (and 8 in
// the mesh),
// and its faults: ranks that crash, are killed or exit early, and a launcher stopped by SIGTERM. After each
// launch no rank process and no cpsim segment may remain.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>

#include "backend_cases.hpp"
#include "sim/comm/processes_backend.hpp"

using namespace cpsim;
using namespace cpsim::test;

namespace {
constexpr Backend kB = Backend::processes;
const int kRanks[] = {1, 2, 3, 4};
}  // namespace

TEST_CASE("processes: blocking send and recv deliver every size between paired ranks") {
  for (int c : kRanks) {
    CAPTURE(c);
    check_send_recv(kB, c);
  }
  check_nothing_left_behind();
}

TEST_CASE("processes: isend and irecv complete in any wait order, and test() polls them to completion") {
  for (int c : kRanks) {
    CAPTURE(c);
    check_isend_irecv(kB, c);
  }
}

TEST_CASE("processes: sendrecv rings run forwards and backwards without deadlock") {
  for (int c : kRanks) {
    CAPTURE(c);
    check_sendrecv_rings(kB, c, edge_sizes());
  }
}

TEST_CASE("processes: all_gather returns every rank's bytes in rank order, in place too") {
  for (int c : kRanks) {
    CAPTURE(c);
    check_all_gather(kB, c, edge_sizes());
  }
}

TEST_CASE("processes: reduce_scatter leaves each rank the sum of its chunk over all ranks") {
  for (int c : kRanks) {
    CAPTURE(c);
    check_reduce_scatter(kB, c);
  }
}

TEST_CASE("processes: a receive with a fold lands op(message, own), whichever rank makes the pass") {
  check_receive_with_fold(kB);
}

TEST_CASE("processes: all_to_all delivers chunk p of every rank to rank p") {
  for (int c : kRanks) {
    CAPTURE(c);
    check_all_to_all(kB, c, edge_sizes());
  }
}

TEST_CASE("processes: all_reduce computes sum, max and min for counts C does not divide") {
  for (int c : kRanks) {
    CAPTURE(c);
    check_all_reduce(kB, c);
  }
}

TEST_CASE("processes: no rank leaves a barrier before the last one arrives") {
  for (int c : kRanks) {
    CAPTURE(c);
    check_barrier(kB, c);
  }
}

TEST_CASE("processes: split builds the 2-D mesh of C=8, A=2 and keeps its messages apart from the world's") {
  check_split_mesh(kB);
}

TEST_CASE("processes: split orders groups by key and leaves negative colors out") {
  for (int c : kRanks) {
    CAPTURE(c);
    check_split_orders(kB, c);
  }
}

TEST_CASE("processes: random messages in random orders arrive intact (seeded)") {
  check_stress(kB, 4, 20240601, 40);
  check_stress(kB, 3, 7, 30);
}

TEST_CASE("processes: every call is counted by the conventions, and the counters come back from each process") {
  check_counting(kB);
}

TEST_CASE("processes: a rank's result string comes back to the launcher whatever its size") {
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, (std::size_t{4} << 20) + 11}) {
    CAPTURE(n);
    auto out = launch(options(kB, 3), [=](Communicator& comm) {
      const Bytes b = payload(comm.rank(), n, 99);
      return std::string(reinterpret_cast<const char*>(b.data()), n);
    });
    for (const auto& o : out)
      CHECK(expect_payload(reinterpret_cast<const std::byte*>(o.result.data()), o.rank, n, 99, "result").empty());
  }
}

TEST_CASE("processes: a rank that throws fails the run within seconds, naming the rank and its error") {
  check_a_rank_that_throws(kB);
  check_nothing_left_behind();
}

TEST_CASE("processes: a deadlock is reported by the timeout, naming the rank, the call and the peer") {
  check_a_deadlock_is_reported(kB);
  check_nothing_left_behind();
}

TEST_CASE("processes: a receive of a different size than the send is an error naming both sizes") {
  check_mismatched_sizes(kB, 100);
  check_mismatched_sizes(kB, 70001);
  check_nothing_left_behind();
}

TEST_CASE("processes: ranks calling different collectives are told so") {
  check_mismatched_collectives(kB);
  check_nothing_left_behind();
}

TEST_CASE("processes: a collective that one rank never calls fails once that rank has finished") {
  check_a_collective_called_by_some_ranks_only(kB);
  check_nothing_left_behind();
}

TEST_CASE("processes: a rank killed with SIGKILL in the middle of a collective fails the run within seconds") {
  const Failure f = expect_failure(options(kB, 4), [](Communicator& comm) {
    std::vector<std::byte> mine(4 << 20), all(16 << 20);
    if (comm.rank() == 2) {
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        ::kill(::getpid(), SIGKILL);
      }).detach();
    }
    for (;;) comm.all_gather(mine.data(), all.data(), mine.size());
    return std::string();
  });
  CHECK(f.rank == 2);
  CHECK_MESSAGE(f.what.find("killed by SIGKILL (signal 9)") != std::string::npos, f.what);
  CHECK(f.seconds < 5);
  check_nothing_left_behind();
}

TEST_CASE("processes: a rank that crashes fails the run, naming the rank") {
  const Failure f = expect_failure(options(kB, 3), [](Communicator& comm) {
    comm.barrier();
    if (comm.rank() == 1) {
      std::signal(SIGSEGV, SIG_DFL);  // not the test framework's crash report: just the crash
      ::raise(SIGSEGV);
    }
    comm.barrier();
    return std::string();
  });
  CHECK(f.rank == 1);
  CHECK_MESSAGE(f.what.find("crashed with SIGSEGV (signal 11)") != std::string::npos, f.what);
  CHECK(f.seconds < 5);
  check_nothing_left_behind();
}

TEST_CASE("processes: a rank that exits early fails the run, naming the rank and its exit") {
  for (int code : {0, 3}) {
    CAPTURE(code);
    const Failure f = expect_failure(options(kB, 3), [=](Communicator& comm) {
      if (comm.rank() == 2) ::_exit(code);
      std::int64_t x = 1;
      comm.all_reduce(&x, &x, 1, DType::i64, ReduceOp::sum);
      return std::string();
    });
    CHECK(f.rank == 2);
    const std::string want = code == 0 ? "exited (code 0) before its rank function returned" : "exited with code 3";
    CHECK_MESSAGE(f.what.find(want) != std::string::npos, f.what);
    CHECK(f.seconds < 5);
  }
  check_nothing_left_behind();
}

TEST_CASE("processes: SIGTERM or SIGINT to the launcher stops every rank and leaves no process or segment behind") {
  for (const int sig : {SIGTERM, SIGINT}) {
    CAPTURE(sig);
    // Orphans of the launcher would be re-parented to this process, where has_children() sees them.
    REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
    int ready[2];
    REQUIRE(::pipe(ready) == 0);
    const pid_t launcher = ::fork();
    REQUIRE(launcher >= 0);
    if (launcher == 0) {  // the launcher: its ranks wait in a barrier that rank 0 never joins
      ::close(ready[0]);
      std::signal(sig, SIG_DFL);  // the handler the launcher must restore and re-raise into
      try {
        launch(options(kB, 3), [&](Communicator& comm) {
          if (comm.rank() == 0) {
            const char go = 1;
            if (::write(ready[1], &go, 1) != 1) return std::string("pipe");
            std::this_thread::sleep_for(std::chrono::seconds(60));
          }
          comm.barrier();
          return std::string();
        });
      } catch (...) {
      }
      ::_exit(0);
    }
    ::close(ready[1]);
    char go = 0;
    REQUIRE(::read(ready[0], &go, 1) == 1);
    ::close(ready[0]);
    const auto t0 = std::chrono::steady_clock::now();
    REQUIRE(::kill(launcher, sig) == 0);
    int st = 0;
    REQUIRE(::waitpid(launcher, &st, 0) == launcher);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
    CHECK_MESSAGE(WIFSIGNALED(st), "the launcher should end by the signal it got, re-raised after cleaning up");
    if (WIFSIGNALED(st)) CHECK(WTERMSIG(st) == sig);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a surviving rank would now be our child
    check_nothing_left_behind();
    ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  }
}

TEST_CASE("processes: a launcher started with SIGINT and SIGTERM ignored keeps them ignored, in its ranks too") {
  // A background job (`cpsim run ... &` in a non-interactive shell) starts with SIGINT ignored; nohup and the
  // like do the same. The signals, sent to the launcher and to every rank, must change nothing.
  int pids[2], go[2];
  REQUIRE(::pipe(pids) == 0);
  REQUIRE(::pipe(go) == 0);
  const pid_t launcher = ::fork();
  REQUIRE(launcher >= 0);
  if (launcher == 0) {
    ::close(pids[0]);
    ::close(go[1]);
    std::signal(SIGINT, SIG_IGN);
    std::signal(SIGTERM, SIG_IGN);
    bool ok = false;
    try {
      const auto out = launch(options(kB, 3), [&](Communicator& comm) {
        const pid_t me = ::getpid();
        if (::write(pids[1], &me, sizeof me) != sizeof me) return std::string("pipe");
        if (comm.rank() == 0) {  // everyone waits in the barrier until the test has sent its signals
          char byte = 0;
          if (::read(go[0], &byte, 1) != 1) return std::string("pipe");
        }
        comm.barrier();
        return std::string("done");
      });
      ok = out.size() == 3 && out[0].result == "done" && out[2].result == "done";
    } catch (...) {
    }
    struct sigaction sa {};
    sigaction(SIGINT, nullptr, &sa);
    ok = ok && sa.sa_handler == SIG_IGN;  // still ignored after the launch
    sigaction(SIGTERM, nullptr, &sa);
    ok = ok && sa.sa_handler == SIG_IGN;
    ::_exit(ok ? 0 : 1);
  }
  ::close(pids[1]);
  ::close(go[0]);
  std::vector<pid_t> targets{launcher};
  for (int r = 0; r < 3; ++r) {
    pid_t pid = 0;
    REQUIRE(::read(pids[0], &pid, sizeof pid) == sizeof pid);
    targets.push_back(pid);
  }
  ::close(pids[0]);
  for (const pid_t pid : targets) {
    CHECK(::kill(pid, SIGINT) == 0);
    CHECK(::kill(pid, SIGTERM) == 0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the signals arrive (and must do nothing)
  const char byte = 1;
  REQUIRE(::write(go[1], &byte, 1) == 1);
  ::close(go[1]);
  int st = 0;
  REQUIRE(::waitpid(launcher, &st, 0) == launcher);
  CHECK_MESSAGE(WIFEXITED(st), "the launcher was stopped by a signal it was started ignoring");
  if (WIFEXITED(st)) CHECK_MESSAGE(WEXITSTATUS(st) == 0, "the launch failed, or the signals were not ignored after it");
  check_nothing_left_behind();
}

namespace {
volatile std::sig_atomic_t g_own_sigchld = 0;
extern "C" void own_sigchld(int) {
  g_own_sigchld = g_own_sigchld + 1;
}
}  // namespace

TEST_CASE("processes: a launch leaves SIGCHLD as it found it, a program's own handler included") {
  // The launcher reaps its ranks by polling, never by a handler of its own: a program's own handler stays in place
  // and sees its ranks' exits.
  struct sigaction sa {};
  sigaction(SIGCHLD, nullptr, &sa);
  const bool default_before = sa.sa_handler == SIG_DFL;
  REQUIRE_MESSAGE(default_before, "the test starts with SIGCHLD's default");
  auto ranks_ok = [] {
    const auto out = launch(options(kB, 3), [](Communicator& comm) {
      comm.barrier();
      return std::string("done");
    });
    return out.size() == 3 && out[2].result == "done";
  };
  CHECK(ranks_ok());
  sigaction(SIGCHLD, nullptr, &sa);
  const bool default_after = sa.sa_handler == SIG_DFL;
  CHECK_MESSAGE(default_after, "SIGCHLD's default was not restored");

  std::signal(SIGCHLD, own_sigchld);
  g_own_sigchld = 0;
  CHECK(ranks_ok());
  sigaction(SIGCHLD, nullptr, &sa);
  const bool kept = sa.sa_handler == &own_sigchld;
  CHECK_MESSAGE(kept, "the program's own SIGCHLD handler was replaced");
  CHECK(g_own_sigchld > 0);
  std::signal(SIGCHLD, SIG_DFL);
  check_nothing_left_behind();
}

TEST_CASE("processes: a rank killed while its peers copy its messages fails the run within seconds") {
  const Failure f = expect_failure(options(kB, 4), [](Communicator& comm) {
    Bytes mine(1 << 20), all(4 << 20), next(1 << 20);
    if (comm.rank() == 1) {
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        ::kill(::getpid(), SIGKILL);
      }).detach();
    }
    const int c = comm.size(), r = comm.rank();
    for (;;) {
      comm.all_gather(mine.data(), all.data(), mine.size());
      comm.sendrecv(mine.data(), mine.size(), (r + 1) % c, next.data(), next.size(), (r + c - 1) % c);
    }
    return std::string();
  });
  CHECK(f.rank == 1);
  CHECK_MESSAGE(f.what.find("killed by SIGKILL (signal 9)") != std::string::npos, f.what);
  CHECK(f.seconds < 5);
  check_nothing_left_behind();
}

TEST_CASE("processes: the memory for messages in flight grows with the ranks' buffers, within half of /dev/shm") {
  const std::size_t mib = std::size_t{1} << 20, free = std::size_t{64} << 30;
  CHECK(message_pool_bytes(4, 0, free) == 1024 * mib);            // the least
  CHECK(message_pool_bytes(4, 100 * mib, free) == 1600 * mib);    // four times every rank's buffers
  CHECK(message_pool_bytes(4, 100 * mib, 100 * mib) == 50 * mib);  // half of what /dev/shm has free
  CHECK(message_pool_bytes(64, std::size_t{1} << 50, free) == free / 2);  // a petabyte per rank does not wrap
  CHECK(message_pool_bytes(4, 0, 12345) == 4096);  // whole pages
}

TEST_SUITE("slow") {
  TEST_CASE("processes: 64 MiB messages cross sendrecv rings, all_gather and all_to_all intact") {
    const std::size_t big = std::size_t{64} << 20;
    check_sendrecv_rings(kB, 4, {big});
    check_all_gather(kB, 4, {big / 4});
    check_all_to_all(kB, 4, {big / 4});
    check_nothing_left_behind();
  }
}
