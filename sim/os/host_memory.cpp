#include "sim/os/host_memory.hpp"

#include <sys/resource.h>

#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

namespace cpsim {
namespace {

constexpr std::int64_t kUnlimited = std::numeric_limits<std::int64_t>::max();

// "Key:   1234 kB" -> 1234 * 1024, from a /proc file of such lines.
std::optional<std::int64_t> proc_kib(const std::string& path, const std::string& key) {
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);)
    if (line.rfind(key + ":", 0) == 0) {
      std::istringstream s(line.substr(key.size() + 1));
      std::int64_t kib = 0;
      if (s >> kib) return kib * 1024;
    }
  return std::nullopt;
}

// The first number in a file ("max" and unreadable files: nullopt).
std::optional<std::int64_t> file_number(const std::string& path) {
  std::ifstream f(path);
  std::int64_t v = 0;
  if (f >> v) return v;
  return std::nullopt;
}

// "key value" lines (memory.stat).
std::int64_t stat_value(const std::string& path, const std::string& key) {
  std::ifstream f(path);
  std::string k;
  std::int64_t v = 0;
  while (f >> k >> v)
    if (k == key) return v;
  return 0;
}

// The folder of this process's memory cgroup: v2 ("0::/path" under /sys/fs/cgroup) or v1 ("N:memory:/path" under
// /sys/fs/cgroup/memory). Inside a container the path may name the host's tree: then the mount's root is ours.
struct Cgroup {
  std::string dir;
  bool v2 = false;
};

std::optional<Cgroup> memory_cgroup() {
  std::ifstream f("/proc/self/cgroup");
  std::optional<Cgroup> v1, v2;
  for (std::string line; std::getline(f, line);) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers.empty()) v2 = Cgroup{"/sys/fs/cgroup" + path, true};
    std::istringstream names(controllers);
    for (std::string c; std::getline(names, c, ',');)
      if (c == "memory") v1 = Cgroup{"/sys/fs/cgroup/memory" + path, false};
  }
  for (auto* c : {&v1, &v2}) {
    if (!*c) continue;
    const std::string limit_file = (*c)->v2 ? "/memory.max" : "/memory.limit_in_bytes";
    if (std::ifstream(((*c)->dir + limit_file)).good()) return *c;
    const std::string root = (*c)->v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
    if (std::ifstream(root + limit_file).good()) return Cgroup{root, (*c)->v2};
  }
  return std::nullopt;
}

// The cgroup's limit less what it holds (its usage less the inactive file cache it can drop).
std::int64_t cgroup_headroom() {
  const auto cg = memory_cgroup();
  if (!cg) return kUnlimited;
  const auto limit = file_number(cg->dir + (cg->v2 ? "/memory.max" : "/memory.limit_in_bytes"));
  const auto usage = file_number(cg->dir + (cg->v2 ? "/memory.current" : "/memory.usage_in_bytes"));
  if (!limit || *limit >= (std::int64_t{1} << 62)) return kUnlimited;  // "max", or v1's "no limit" (2^63 - 4096)
  const std::int64_t inactive = stat_value(cg->dir + "/memory.stat", cg->v2 ? "inactive_file" : "total_inactive_file");
  const std::int64_t held = usage ? std::max<std::int64_t>(0, *usage - inactive) : 0;
  return std::max<std::int64_t>(0, *limit - held);
}

std::int64_t address_space_headroom() {
  rlimit r{};
  if (getrlimit(RLIMIT_AS, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return kUnlimited;
  const std::int64_t mapped = proc_kib("/proc/self/status", "VmSize").value_or(0);
  const auto limit = static_cast<std::int64_t>(std::min<rlim_t>(r.rlim_cur, static_cast<rlim_t>(kUnlimited)));
  return std::max<std::int64_t>(0, limit - mapped);
}

}  // namespace

HostMemory host_memory() {
  HostMemory m;
  m.machine = {kUnlimited, "MemAvailable"};
  if (const auto avail = proc_kib("/proc/meminfo", "MemAvailable")) m.machine.bytes = *avail;
  if (const std::int64_t cg = cgroup_headroom(); cg < m.machine.bytes) m.machine = {cg, "the cgroup limit"};
  m.process = m.machine;
  if (const std::int64_t as = address_space_headroom(); as < m.process.bytes)
    m.process = {as, "RLIMIT_AS (ulimit -v)"};
  return m;
}

}  // namespace cpsim
