#include "sim/comm/rank_binding.hpp"

#include <doctest/doctest.h>
#include <sched.h>

#include <string>
#include <vector>

#include "sim/comm/launcher.hpp"
#include "sim/core/bytes.hpp"

using namespace cpsim;

namespace {

// The CPUs each rank of a launch may run on, as the rank itself reads them (rank order).
std::vector<std::vector<int>> cpus_of_ranks(Backend backend, int ranks, bool bind) {
  LaunchOptions opt;
  opt.ranks = ranks;
  opt.backend = backend;
  opt.bind = bind;
  const auto outcomes = launch(opt, [](Communicator&) {
    ByteWriter w;
    const std::vector<int> cpus = usable_cpus();
    w.put(static_cast<std::int64_t>(cpus.size()));
    for (int cpu : cpus) w.put(static_cast<std::int64_t>(cpu));
    return w.take();
  });
  std::vector<std::vector<int>> out;
  for (const auto& o : outcomes) {
    ByteReader rd(o.result);
    std::vector<int> cpus(static_cast<std::size_t>(rd.get<std::int64_t>()));
    for (int& cpu : cpus) cpu = static_cast<int>(rd.get<std::int64_t>());
    out.push_back(cpus);
  }
  return out;
}

}  // namespace

TEST_CASE("usable_cpus lists every CPU this thread may run on, in increasing order") {
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
  const std::vector<int> cpus = usable_cpus();
  CHECK(static_cast<int>(cpus.size()) == CPU_COUNT(&set));
  for (std::size_t i = 0; i < cpus.size(); ++i) {
    CHECK(CPU_ISSET(cpus[i], &set));
    if (i > 0) CHECK(cpus[i - 1] < cpus[i]);
  }
}

TEST_CASE("a rank binding runs the thread on its rank's CPU among those given, and gives the CPUs before back") {
  const std::vector<int> before = usable_cpus();
  REQUIRE_FALSE(before.empty());
  for (int rank : {0, 1, 5}) {
    CAPTURE(rank);
    {
      const RankBinding binding(rank, before);
      CHECK(binding.bound());
      CHECK(usable_cpus() == std::vector<int>{before[rank % before.size()]});
    }
    CHECK(usable_cpus() == before);
  }
}

TEST_CASE("a rank binding with no CPUs given leaves the thread where it may run") {
  const std::vector<int> before = usable_cpus();
  const RankBinding binding(3, {});
  CHECK_FALSE(binding.bound());
  CHECK(usable_cpus() == before);
}

TEST_CASE("a bound launch runs rank r on the (r mod n)-th usable CPU, on threads and on processes") {
  const std::vector<int> cpus = usable_cpus();
  REQUIRE_FALSE(cpus.empty());
  for (Backend b : {Backend::threads, Backend::processes}) {
    CAPTURE(backend_name(b));
    const auto got = cpus_of_ranks(b, 5, true);  // more ranks than this machine has CPUs, on most machines
    REQUIRE(got.size() == 5);
    for (std::size_t r = 0; r < got.size(); ++r) CHECK(got[r] == std::vector<int>{cpus[r % cpus.size()]});
    CHECK(usable_cpus() == cpus);  // the launcher's own thread is not bound
  }
}

TEST_CASE("an unbound launch leaves every rank the CPUs its launcher may use") {
  const std::vector<int> cpus = usable_cpus();
  for (Backend b : {Backend::threads, Backend::processes}) {
    CAPTURE(backend_name(b));
    for (const auto& rank_cpus : cpus_of_ranks(b, 3, false)) CHECK(rank_cpus == cpus);
  }
}
