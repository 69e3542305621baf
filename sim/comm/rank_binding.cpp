#include "sim/comm/rank_binding.hpp"

namespace cpsim {

std::vector<int> usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  return cpus;
}

std::vector<int> cpus_to_bind(bool bind) {
  return bind ? usable_cpus() : std::vector<int>{};
}

int rank_cpu(int rank, const std::vector<int>& cpus) {
  return cpus[static_cast<std::size_t>(rank) % cpus.size()];
}

RankBinding::RankBinding(int rank, const std::vector<int>& cpus) {
  CPU_ZERO(&before_);
  if (cpus.empty() || rank < 0 || ::sched_getaffinity(0, sizeof before_, &before_) != 0) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(rank_cpu(rank, cpus), &one);
  bound_ = ::sched_setaffinity(0, sizeof one, &one) == 0;
}

RankBinding::~RankBinding() {
  if (bound_) ::sched_setaffinity(0, sizeof before_, &before_);
}

}  // namespace cpsim
