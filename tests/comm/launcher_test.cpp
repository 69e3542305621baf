#include "sim/comm/launcher.hpp"

#include <doctest/doctest.h>

#include <vector>

#include "comm_test_support.hpp"

using namespace cpsim;

TEST_CASE("backend names parse back to their backend, and an unknown name lists the accepted ones") {
  for (Backend b : {Backend::threads, Backend::processes, Backend::mpi, Backend::nccl, Backend::cuda_threads})
    CHECK(parse_backend(backend_name(b)) == b);
  try {
    parse_backend("smoke-signals");
    FAIL("expected a UsageError");
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()).find("threads, processes, mpi") != std::string::npos);
  }
}

TEST_CASE("a backend that is not built in is a usage error naming it and the ones that are") {
  std::vector<Backend> absent;
#ifndef CPSIM_HAVE_MPI
  absent.push_back(Backend::mpi);
#endif
#ifndef CPSIM_HAVE_CUDA
  absent.insert(absent.end(), {Backend::nccl, Backend::cuda_threads});
#endif
  for (Backend b : absent) {
    LaunchOptions opt;
    opt.ranks = 2;
    opt.backend = b;
    try {
      launch(opt, [](Communicator&) { return std::string(); });
      FAIL("expected a UsageError");
    } catch (const UsageError& e) {
      const std::string what = e.what();
      CHECK(what.find("backend '" + std::string(backend_name(b)) + "' is not built in") != std::string::npos);
      CHECK(what.find("--backend threads") != std::string::npos);
    }
  }
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
