#include "sim/comm/launcher.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "comm_test_support.hpp"
#include "sim/comm/backend_registry.hpp"

using namespace cpsim;

TEST_CASE("backend names parse back to their backend, and an unknown name lists the accepted ones") {
  for (Backend b : all_backends()) CHECK(parse_backend(backend_name(b)) == b);
  try {
    parse_backend("smoke-signals");
    FAIL("expected a UsageError");
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()).find("threads, processes, mpi") != std::string::npos);
  }
}

TEST_CASE("every backend is reachable through the registry, or its absence says what the build lacks") {
  for (Backend b : all_backends()) {
    CAPTURE(backend_name(b));
    if (const BackendInfo* info = find_backend(b)) {
      CHECK(info->backend == b);
      CHECK(info->launch);
      CHECK_FALSE(info->device.empty());
      CHECK(&built_in_backend(b) == info);
      continue;
    }
    CHECK_FALSE(backend_requirement(b).empty());
    LaunchOptions opt;
    opt.ranks = 2;
    opt.backend = b;
    try {
      launch(opt, [](Communicator&) { return std::string(); });
      FAIL("expected a UsageError");
    } catch (const UsageError& e) {
      const std::string what = e.what();
      CHECK(what.find("backend '" + std::string(backend_name(b)) + "' is not built in (it needs " +
                      std::string(backend_requirement(b)) + ")") != std::string::npos);
      CHECK(what.find("--backend threads") != std::string::npos);
    }
  }
}

TEST_CASE("every build holds the threads and processes backends; mpi and the GPU ones as it was configured") {
  const std::vector<Backend> held = built_in_backends();
  auto holds = [&](Backend b) { return std::find(held.begin(), held.end(), b) != held.end(); };
  CHECK(holds(Backend::threads));
  CHECK(holds(Backend::processes));
#ifdef CPSIM_HAVE_MPI
  CHECK(holds(Backend::mpi));
  CHECK(find_backend(Backend::mpi)->job_ranks);
#else
  CHECK_FALSE(holds(Backend::mpi));
#endif
#ifdef CPSIM_HAVE_CUDA
  CHECK(holds(Backend::nccl));
  CHECK(holds(Backend::cuda_threads));
  CHECK(find_backend(Backend::nccl)->device == "cuda");
#else
  CHECK_FALSE(holds(Backend::nccl));
  CHECK_FALSE(holds(Backend::cuda_threads));
#endif
  CHECK(find_backend(Backend::threads)->device == "cpu");
  CHECK_FALSE(find_backend(Backend::threads)->job_ranks);
}

TEST_CASE("more ranks than a backend runs is a usage error with its fix") {
  LaunchOptions opt;
  opt.ranks = find_backend(Backend::processes)->max_ranks + 1;
  opt.backend = Backend::processes;
  CHECK_THROWS_WITH_AS(launch(opt, [](Communicator&) { return std::string(); }),
                       doctest::Contains("the processes backend runs at most"), UsageError);
}

#ifdef CPSIM_HAVE_MPI
TEST_CASE("the mpi backend outside mpirun with more than one rank is a usage error naming mpirun") {
  if (launcher_rank() >= 0) return;  // this test itself runs under an MPI launcher
  LaunchOptions opt;
  opt.ranks = 2;
  opt.backend = Backend::mpi;
  try {
    launch(opt, [](Communicator&) { return std::string(); });
    FAIL("expected a UsageError");
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()).find("not started by an MPI launcher; run it as `mpirun -np 2") != std::string::npos);
  }
}
#endif

TEST_CASE("fewer than one rank is a usage error") {
  LaunchOptions opt;
  opt.ranks = 0;
  CHECK_THROWS_AS(launch(opt, [](Communicator&) { return std::string(); }), UsageError);
}

TEST_CASE("launch returns each rank's result and Recorder in rank order, on both CPU backends") {
  for (Backend b : {Backend::threads, Backend::processes}) {
    CAPTURE(backend_name(b));
    auto out = launch(test::options(b, 3), [](Communicator& comm) {
      comm.recorder().begin_phase("forward");
      comm.barrier();
      comm.recorder().end_phase();
      return comm.backend() + ":" + std::to_string(comm.rank()) + "/" + std::to_string(comm.size());
    });
    REQUIRE(out.size() == 3);
    for (int r = 0; r < 3; ++r) {
      CHECK(out[r].rank == r);
      CHECK(out[r].result == std::string(backend_name(b)) + ":" + std::to_string(r) + "/3");
      CHECK(out[r].stats.rank() == r);
      CHECK(out[r].stats.comm_counts().count("barrier") == 1);
      CHECK(out[r].stats.phase_us().count("forward") == 1);
    }
  }
}

#ifdef CPSIM_HAVE_CUDA
TEST_CASE("a GPU backend on a machine without a usable GPU fails with the cause named") {
  for (Backend b : {Backend::nccl, Backend::cuda_threads}) {
    LaunchOptions opt;
    opt.ranks = 1;
    opt.backend = b;
    try {
      launch(opt, [](Communicator&) { return std::string(); });
      MESSAGE("a usable GPU is present: nothing to check");
    } catch (const std::exception& e) {
      const std::string what = e.what();
      CHECK(what.find(std::string(backend_name(b))) != std::string::npos);
      CHECK(what.find("--backend threads") != std::string::npos);
    }
  }
}
#endif
