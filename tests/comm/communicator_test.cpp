// The base class's argument checks: the same on every backend, raised before anything is sent.
#include "sim/comm/communicator.hpp"

#include <doctest/doctest.h>

#include "comm_test_support.hpp"

using namespace cpsim;

TEST_CASE("a peer outside the communicator, a negative tag or a null buffer is a usage error naming the call") {
  auto out = launch(test::options(Backend::threads, 2), [](Communicator& comm) {
    test::Complaints bad;
    auto expect_usage = [&](const char* what, const std::string& must_say, auto&& call) {
      try {
        call();
        bad.add(std::string(what) + " was accepted; ");
      } catch (const UsageError& e) {
        if (std::string(e.what()).find(must_say) == std::string::npos)
          bad.add(std::string(what) + " said: " + e.what() + "; ");
      }
    };
    int x = 0;
    expect_usage("send to rank 2", "send names rank 2, but this communicator has ranks 0..1",
                 [&] { comm.send(&x, 4, 2); });
    expect_usage("irecv from rank -1", "irecv names rank -1", [&] { comm.irecv(&x, 4, -1); });
    expect_usage("a negative tag", "tags must be >= 0", [&] { comm.isend(&x, 4, 0, -3); });
    expect_usage("a null buffer", "from a null buffer", [&] { comm.recv(nullptr, 4, 0); });
    expect_usage("sendrecv to rank 5", "sendrecv (destination) names rank 5",
                 [&] { comm.sendrecv(&x, 4, 5, &x, 4, 0); });
    comm.barrier();  // the communicator still works after refused calls
    return bad.result();
  });
  for (const auto& o : out) CHECK_MESSAGE(o.result.empty(), o.result);
}
