// A rank that fails, for the fault tests of tests/mpi/mpi.cmake: `mpirun -np 4 mpi_fault_probe <fault>` runs
// one launch on the mpi backend in which rank 2 (or every rank) goes wrong, and must end the whole job:
//   throw     rank 2 throws from its rank function, with a receive still pending, while the others wait for it
//             in an all_gather
//   crash     rank 2 dies of SIGABRT (std::abort) while the others wait for it
//   deadlock  every rank receives first and nobody sends (timeout 0.3 s: the watchdog ends the job)
//   mismatch  rank 1 posts a receive of 50 bytes for rank 0's message of 100 bytes
// Exits 0 only if the launch returned, which none of these may.
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/comm/launcher.hpp"

int main(int argc, char** argv) {
  using namespace cpsim;
  const std::string fault = argc > 1 ? argv[1] : "";
  LaunchOptions opt;
  opt.ranks = 4;
  opt.backend = Backend::mpi;
  opt.timeout = std::chrono::milliseconds(fault == "deadlock" ? 300 : 60000);
  launch(opt, [&](Communicator& comm) {
    std::vector<std::byte> a(1024), all(4096);
    comm.barrier();
    if (fault == "throw" && comm.rank() == 2) {
      int x = 0;
      Request never = comm.irecv(&x, sizeof x, 3, 9);  // pending while the exception unwinds: must not be waited
      throw std::runtime_error("boom in the rank function");
    }
    if (fault == "crash" && comm.rank() == 2) std::abort();
    if (fault == "deadlock") {
      int x = 0;
      comm.recv(&x, sizeof x, comm.rank() ^ 1, 4);
    }
    if (fault == "mismatch") {
      if (comm.rank() == 0) comm.send(a.data(), 100, 1, 3);
      if (comm.rank() == 1) comm.recv(a.data(), 50, 0, 3);
      comm.barrier();
    }
    for (;;) comm.all_gather(a.data(), all.data(), 1024);  // waits for the failed rank forever
    return std::string();
  });
  std::cerr << "mpi_fault_probe: the launch returned, but rank 2 should have ended the job\n";
  return 0;
}
