// Helpers for the communicator tests: payload patterns, running a rank function on a backend and checking
// what each rank reported, and looking for processes or segments a run left behind.
//
// Rank functions never use doctest themselves (it is not thread-safe, and a forked rank's assertions would be
// lost): they return "" when all was as expected, or a description of the first things that were not.
#pragma once
#include <dirent.h>
#include <doctest/doctest.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sim/comm/envelope.hpp"
#include "sim/comm/launcher.hpp"
#include "sim/core/host_arena.hpp"

namespace cpsim::test {

// Host memory as a run's message buffers take it (sim/core/host_arena.hpp).
using Bytes = std::vector<std::byte, ArenaAllocator<std::byte>>;

// The message `salt` from rank `rank`: distinct across ranks, messages and positions (8-byte words of a hash,
// so a message shifted by any whole number of bytes does not match).
inline Bytes payload(int rank, std::size_t n, std::uint64_t salt) {
  Bytes b(n);
  const std::uint64_t key = mix64(salt * 1000003 + static_cast<std::uint64_t>(rank));
  for (std::size_t w = 0; w * 8 < n; ++w) {
    const std::uint64_t word = mix64(key ^ w);
    std::memcpy(b.data() + w * 8, &word, std::min<std::size_t>(8, n - w * 8));  // little-endian bytes of the word
  }
  return b;
}

// "" when p[0..n) is rank's message `salt`, otherwise where it first differs.
inline std::string expect_payload(const std::byte* p, int rank, std::size_t n, std::uint64_t salt,
                                  const std::string& what) {
  const Bytes want = payload(rank, n, salt);
  if (n == 0 || std::memcmp(p, want.data(), n) == 0) return {};
  for (std::size_t i = 0; i < n; ++i) {
    if (p[i] != want[i]) {
      return what + ": byte " + std::to_string(i) + " of " + std::to_string(n) + " is " +
             std::to_string(static_cast<int>(p[i])) + ", expected " + std::to_string(static_cast<int>(want[i])) + "; ";
    }
  }
  return {};
}

// Collects a rank's complaints, keeping the first few.
struct Complaints {
  std::string text;
  int count = 0;
  void add(const std::string& s) {
    if (s.empty()) return;
    if (++count <= 4) text += s;
  }
  void expect(bool ok, const std::string& what) {
    if (!ok) add(what + "; ");
  }
  std::string result() const { return count <= 4 ? text : text + "(+" + std::to_string(count - 4) + " more)"; }
};

using RankCheck = std::function<std::string(Communicator&)>;

// Each rank's largest buffers in the cases below, from which the processes backend sizes its memory for messages.
constexpr std::size_t kTestHeapBytes = std::size_t{4} << 20;

inline LaunchOptions options(Backend b, int ranks, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  LaunchOptions opt;
  opt.ranks = ranks;
  opt.backend = b;
  opt.timeout = timeout;
  opt.heap_bytes = kTestHeapBytes;
  return opt;
}

// Runs `check` on every rank and fails the test case with each rank's complaints. Under MPI only rank 0 gets
// the outcomes (and checks them); the other processes get none.
inline std::vector<RankOutcome> run_checked(Backend b, int ranks, const RankCheck& check) {
  auto out = launch(options(b, ranks), check);
  if (b == Backend::mpi && out.empty() && launcher_rank() > 0) return out;
  REQUIRE(out.size() == static_cast<std::size_t>(ranks));
  for (const auto& o : out) CHECK_MESSAGE(o.result.empty(), "rank ", o.rank, " of ", ranks, ": ", o.result);
  return out;
}

// What a failed run reported, and how long it took to report it.
struct Failure {
  int rank = -1;
  std::string what;
  double seconds = 0;
};

inline Failure expect_failure(const LaunchOptions& opt, const RankCheck& fn) {
  Failure f;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    launch(opt, fn);
    FAIL("the run was expected to fail, but every rank returned");
  } catch (const RankFailure& e) {
    f.rank = e.rank;
    f.what = e.what();
  }
  f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return f;
}

// Memory every rank can see on both backends: created before launch, shared with threads and inherited by
// forked ranks (MAP_SHARED).
template <class T>
struct SharedCell {
  T* p = nullptr;
  SharedCell() {
    void* m = ::mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(m != MAP_FAILED);
    p = new (m) T();
  }
  ~SharedCell() { ::munmap(p, sizeof(T)); }
  T& operator*() const { return *p; }
  T* operator->() const { return p; }
};

// Child processes of this process (alive or not yet reaped): none may remain after a launch.
inline bool has_children() {
  errno = 0;
  int st = 0;
  const pid_t p = ::waitpid(-1, &st, WNOHANG);
  return !(p == -1 && errno == ECHILD);
}

inline std::set<std::string> cpsim_segments() {
  std::set<std::string> names;
  if (DIR* d = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(d))
      if (std::strncmp(e->d_name, "cpsim-", 6) == 0) names.insert(e->d_name);
    ::closedir(d);
  }
  return names;
}

// cpsim segments that stay in /dev/shm (a run's segment is named for a few microseconds only, so one seen
// twice, 300 ms apart, was left behind).
inline std::set<std::string> lasting_segments() {
  const auto first = cpsim_segments();
  if (first.empty()) return {};
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::set<std::string> both;
  for (const auto& n : cpsim_segments())
    if (first.count(n)) both.insert(n);
  return both;
}

inline void check_nothing_left_behind() {
  CHECK_MESSAGE(!has_children(), "a rank process outlived its launch");
  const auto segs = lasting_segments();
  CHECK_MESSAGE(segs.empty(), "a cpsim segment stayed in /dev/shm: ", *segs.begin());
}

}  // namespace cpsim::test
