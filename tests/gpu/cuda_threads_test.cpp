// The cuda-threads communicator: every call on device buffers, its counts, and how it fails.
#include <doctest/doctest.h>

#include <thread>

#include "comm_cases.hpp"
#include "sim/comm/launcher.hpp"

using namespace cpsim;

namespace {
LaunchOptions ranks(int c, std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  LaunchOptions o;
  o.ranks = c;
  o.timeout = timeout;
  return o;
}
}  // namespace

TEST_CASE("every communicator call delivers the right values on cuda-threads") {
  for (int c : {1, 2, 3, 4, 8}) {
    INFO("C = " << c);
    const auto outcomes = launch_cuda_threads(ranks(c), test::every_call);
    REQUIRE(outcomes.size() == static_cast<std::size_t>(c));
    for (const RankOutcome& o : outcomes) {
      CHECK(o.result == "ok");
      const CommCounts& k = o.stats.comm_counts();
      CHECK(k.count("all_gather") == 2);  // the world's and the split group's
      CHECK(k.count("reduce_scatter") == 1);
      CHECK(k.count("all_to_all") == 1);
      CHECK(k.count("all_reduce") == 2);
      CHECK(k.count("isend") == 1);
      CHECK(k.count("irecv") == 1);
      CHECK(k.count("sendrecv") == 1);
      CHECK(k.count("split") == 1);
    }
  }
}

TEST_CASE("a receive of a different size than its send fails the run naming both sizes") {
  auto fn = [](Communicator& comm) -> std::string {
    auto dev = make_cuda_device(comm.recorder());
    const Buffer b = dev->alloc({1, 4, 1, 1}, DType::f32, Layout::bsnd, "b");
    if (comm.rank() == 0) comm.send(b.data(), 8, 1);
    if (comm.rank() == 1) comm.recv(b.data(), 16, 0);
    return "";
  };
  try {
    launch_cuda_threads(ranks(2), fn);
    FAIL("the launch should have failed");
  } catch (const RankFailure& e) {
    const std::string what = e.what();
    CHECK(what.find("16 bytes") != std::string::npos);
    CHECK(what.find("8 bytes") != std::string::npos);
  }
}

TEST_CASE("a receive that no rank sends fails after the timeout, naming the wait") {
  auto fn = [](Communicator& comm) -> std::string {
    auto dev = make_cuda_device(comm.recorder());
    const Buffer b = dev->alloc({1, 4, 1, 1}, DType::f32, Layout::bsnd, "b");
    if (comm.rank() == 0) comm.recv(b.data(), 16, 1, 3);
    if (comm.rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(2));  // busy, never sends
    return "";
  };
  try {
    launch_cuda_threads(ranks(2, std::chrono::milliseconds(500)), fn);
    FAIL("the launch should have failed");
  } catch (const RankFailure& e) {
    const std::string what = e.what();
    CHECK(what.find("recv from rank 1 (tag 3)") != std::string::npos);
    CHECK(what.find("deadlock") != std::string::npos);
  }
}

TEST_CASE("a rank that throws fails the run under its own rank, and the others stop waiting") {
  auto fn = [](Communicator& comm) -> std::string {
    if (comm.rank() == 2) throw Error("rank 2 gives up");
    comm.barrier();
    return "";
  };
  try {
    launch_cuda_threads(ranks(4), fn);
    FAIL("the launch should have failed");
  } catch (const RankFailure& e) {
    CHECK(e.rank == 2);
  }
}
