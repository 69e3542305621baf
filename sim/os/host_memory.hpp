// How much memory this process may still take, read before a run allocates anything.
//
//   MemAvailable     /proc/meminfo: what the kernel can give without swapping (free memory and reclaimable cache)
//   the cgroup limit memory.max (cgroup v2) or memory.limit_in_bytes (v1) of this process's cgroup, less what the
//                    cgroup holds already (its usage, less the inactive file cache it can reclaim)
//   RLIMIT_AS        the address-space limit (ulimit -v), less the address space this process maps already
// The first two bound the memory of every process of a run on this machine together; RLIMIT_AS bounds each process.
#pragma once
#include <cstdint>
#include <string>

namespace cpsim {

struct MemoryLimit {
  std::int64_t bytes = 0;  // what may still be taken
  std::string source;      // "MemAvailable", "the cgroup limit", "RLIMIT_AS (ulimit -v)", "--memory-limit"
};

struct HostMemory {
  MemoryLimit machine;  // the smaller of MemAvailable and the cgroup's headroom: all processes of the run together
  MemoryLimit process;  // RLIMIT_AS's headroom for one process (as large as `machine` when there is no RLIMIT_AS)
};

// Read now, from /proc and /sys/fs/cgroup. A source that cannot be read does not limit.
HostMemory host_memory();

}  // namespace cpsim
