// The size of this machine's last-level cache, as the kernel reports it.
//
// Read from /sys/devices/system/cpu/cpu0/cache/index*/ (the level, type and size of each of cpu 0's caches; the
// kernel decodes them from CPUID): the largest data or unified cache of the highest level. glibc's
// sysconf(_SC_LEVEL3_CACHE_SIZE) is the fallback only: on an AMD EPYC (Zen 3) virtual machine it reported 256 MiB
// where the kernel (and lscpu) reported the 32 MiB L3 the cores share.
#pragma once
#include <cstddef>
#include <optional>

namespace cpsim {

// Bytes of the last-level cache of cpu 0; nullopt where neither sysfs nor sysconf knows it.
std::optional<std::size_t> last_level_cache_bytes();

}  // namespace cpsim
