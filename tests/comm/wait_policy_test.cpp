#include "sim/comm/wait_policy.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "sim/comm/launcher.hpp"
#include "sim/core/error.hpp"

using namespace cpsim;
using std::chrono::microseconds;

TEST_CASE("CPSIM_WAIT_SPIN_US reads as a whole number of microseconds from 0 to 1000000, nothing else") {
  CHECK(parse_wait_spin("0") == microseconds(0));
  CHECK(parse_wait_spin("250") == microseconds(250));
  CHECK(parse_wait_spin("1000000") == microseconds(1000000));
  for (const char* bad : {"", "-1", "+5", " 5", "5 ", "1e3", "10us", "1000001", "99999999999999999999"})
    CHECK_MESSAGE(!parse_wait_spin(bad), bad);
  CHECK(!parse_wait_spin(nullptr));
}

TEST_CASE("a launch refuses a CPSIM_WAIT_SPIN_US it cannot read before any rank starts, naming the fix") {
  ::setenv("CPSIM_WAIT_SPIN_US", "soon", 1);
  LaunchOptions opt;
  opt.ranks = 2;
  opt.backend = Backend::threads;
  bool ran = false;
  try {
    launch(opt, [&](Communicator&) {
      ran = true;
      return std::string();
    });
    FAIL("expected a UsageError");
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()) ==
          "CPSIM_WAIT_SPIN_US=soon is not a number of microseconds from 0 to 1000000; unset it (a waiting rank then "
          "polls 1 ms before it sleeps), or give e.g. CPSIM_WAIT_SPIN_US=1000");
  }
  ::unsetenv("CPSIM_WAIT_SPIN_US");
  CHECK(!ran);
  check_wait_spin();  // unset: accepted
}
