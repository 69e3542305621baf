#include "sim/cli/bench_comm_cma.hpp"

#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

namespace cpsim::cli {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kIters = 20, kRuns = 3;

template <class Copy>
double best_gbps(std::size_t bytes, Copy copy) {
  double best = 1e300;
  for (int run = 0; run < kRuns; ++run) {
    const auto t0 = Clock::now();
    for (int i = 0; i < kIters; ++i)
      if (!copy()) return 0;
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count() / kIters);
  }
  return static_cast<double>(bytes) / best / 1e9;
}

}  // namespace

CmaProbe probe_cross_memory_attach(std::size_t bytes) {
  CmaProbe p;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  int hold[2];
  if (::pipe(hold) != 0) {
    p.why = std::string("pipe: ") + std::strerror(errno);
    return p;
  }
  const pid_t child = ::fork();
  if (child == 0) {  // holds `src` (the same address in its copy of our memory) until the pipe closes
    ::close(hold[1]);
    char c;
    while (::read(hold[0], &c, 1) < 0 && errno == EINTR) {
    }
    ::_exit(0);
  }
  ::close(hold[0]);
  if (child < 0) {
    p.why = std::string("fork: ") + std::strerror(errno);
    ::close(hold[1]);
    return p;
  }
  int err = 0;
  const iovec local{dst.data(), bytes}, remote{src.data(), bytes};
  p.cma_gbps = best_gbps(bytes, [&] {
    if (::process_vm_readv(child, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(bytes)) return true;
    err = errno;
    return false;
  });
  ::close(hold[1]);
  while (::waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
  }
  p.allowed = err == 0 && p.cma_gbps > 0;
  if (!p.allowed) p.why = std::string("process_vm_readv: ") + std::strerror(err ? err : EIO);
  p.memcpy_gbps = best_gbps(bytes, [&] {
    src[0] = static_cast<char>(src[0] + 1);  // the copies cannot be merged away
    std::memcpy(dst.data(), src.data(), bytes);
    return true;
  });
  return p;
}

}  // namespace cpsim::cli
