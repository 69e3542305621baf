// Ranks bound to CPUs (LaunchOptions::bind): rank r runs on the (r mod n)-th of the n CPUs its launcher may use.
//
// Unbound, the scheduler places the ranks and moves them; with more ranks than cores it settles a launch into one
// placement or another and keeps it, and the placement alone can make a launch's calls of 256 KiB-1 MiB chunks
// half again as long for its whole life (docs/performance/comm.md, "Bound ranks"). Bound, every launch has the
// same placement: what `cpsim bench comm` needs to compare backends, and what MPI benchmarks get from
// `mpirun --bind-to core`. Binding changes how long things take, never what they compute.
#pragma once
#include <sched.h>

#include <vector>

namespace cpsim {

// The CPUs the calling thread may run on, in increasing order (sched_getaffinity; its whole mask may be one CPU).
std::vector<int> usable_cpus();
// What a launcher hands its ranks' bindings: usable_cpus() when the launch binds (LaunchOptions::bind), else none.
std::vector<int> cpus_to_bind(bool bind);
// Rank r's CPU among those given: cpus[r mod cpus.size()] (cpus not empty).
int rank_cpu(int rank, const std::vector<int>& cpus);

// While it lives, the calling thread runs on cpus[rank mod cpus.size()] alone; its mask before comes back when it
// goes. A binding the system refuses (a CPU taken away since) leaves the thread where it was: binding is a
// placement, and a rank runs the same anywhere. With no CPUs given it does nothing.
class RankBinding {
 public:
  RankBinding(int rank, const std::vector<int>& cpus);
  ~RankBinding();
  RankBinding(const RankBinding&) = delete;
  RankBinding& operator=(const RankBinding&) = delete;
  bool bound() const { return bound_; }

 private:
  cpu_set_t before_;
  bool bound_ = false;
};

}  // namespace cpsim
