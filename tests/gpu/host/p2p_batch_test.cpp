// When the nccl communicator launches held-back point-to-point operations (no GPU needed).
#include "sim/cuda/p2p_batch.hpp"

#include <doctest/doctest.h>

using cpsim::cuda::P2pBatch;

TEST_CASE("a ring step's isend + irecv is launched at the irecv, before the step's compute") {
  P2pBatch b;
  CHECK_FALSE(b.add(true));
  CHECK(b.add(false));
  CHECK(b.size() == 2);
  b.clear();
  CHECK(b.empty());
}

TEST_CASE("receives posted before any send wait for a wait, so that a later send joins their group") {
  P2pBatch b;
  CHECK_FALSE(b.add(false));
  CHECK_FALSE(b.add(false));
  CHECK_FALSE(b.add(true));
  CHECK(b.size() == 3);
}

TEST_CASE("the backward ring's two exchanges launch as two groups") {
  P2pBatch b;
  CHECK_FALSE(b.add(true));  // K/V
  CHECK(b.add(false));
  b.clear();
  CHECK_FALSE(b.add(true));  // dK/dV, after the step's compute
  CHECK(b.add(false));
}
