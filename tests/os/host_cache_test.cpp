// The last-level cache as the kernel reports it (sim/os/host_cache.hpp).
#include "sim/os/host_cache.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

using namespace cpsim;

TEST_CASE("the last-level cache is known on Linux and is no smaller than the L2") {
  const auto llc = last_level_cache_bytes();
  REQUIRE(llc.has_value());
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (l2 > 0) CHECK(*llc >= static_cast<std::size_t>(l2));
}

TEST_CASE("where the kernel lists an L3 for cpu 0, the last-level cache is its size") {
  namespace fs = std::filesystem;
  for (int i = 0; i < 16; ++i) {
    const fs::path dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i);
    std::ifstream level_f(dir / "level"), size_f(dir / "size");
    int level = 0;
    std::string size;
    if (!(level_f >> level) || level != 3 || !(size_f >> size)) continue;
    CAPTURE(size);
    REQUIRE(size.back() == 'K');  // the kernel writes cache sizes in KiB
    CHECK(last_level_cache_bytes() == std::stoull(size.substr(0, size.size() - 1)) * 1024);
  }
}
