#include "sim/layout/grid.hpp"

#include <doctest/doctest.h>

using namespace cpsim;

TEST_CASE("the owner grid marks the diagonal partly masked and the cells above it masked, owned by the query's rank") {
  const SeqLayout L(2, 8, Sharding::zigzag);  // chunks: rank 0 owns 0 and 3, rank 1 owns 1 and 2
  const Grid g = owner_grid(L);
  CHECK(g[3][3].rank == 0);
  CHECK(g[3][3].diagonal);
  CHECK(!g[3][3].masked);
  CHECK(g[2][0].rank == 1);
  CHECK(!g[2][0].diagonal);
  CHECK(g[0][1].masked);
  CHECK(g[0][1].rank == -1);
  CHECK(draw_grid(g) ==
        "      k0 k1 k2 k3\n"
        "q0    0\\ .  .  .\n"
        "q1    1  1\\ .  .\n"
        "q2    1  1  1\\ .\n"
        "q3    0  0  0  0\\\n");
}

TEST_CASE("a mask grid marks cells with no visible pair masked and cells cut by a document bound as partial") {
  const SeqLayout L(2, 8, Sharding::contiguous);
  const Mask two_docs(true, 0, {0, 3, 8});  // documents [0, 3) and [3, 8)
  const Grid g = mask_grid(L, two_docs, 2);
  CHECK(g[2][0].masked);  // queries 4,5 see no key of 0,1 (another document)
  CHECK(g[1][1].diagonal);  // queries 2,3 x keys 2,3: 2 sees 2, 3 sees 3 only
  CHECK(!g[1][1].masked);
  CHECK(g[3][2].rank == 1);
  CHECK(!g[3][2].diagonal);  // queries 6,7 see both of keys 4,5
}

TEST_CASE("a cell several ranks compute is drawn as *") {
  Grid g(1, std::vector<GridCell>(1));
  g[0][0].rank = 0;
  g[0][0].ranks = 3;
  g[0][0].diagonal = true;
  CHECK(draw_grid(g) == "      k0\nq0    *\\\n");
}
