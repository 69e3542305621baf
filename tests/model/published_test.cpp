// The published points every prediction is measured against (published.hpp): each within 15% of the model, the
// nearest one found by shape, and its error the model's own, computed afresh.
#include <doctest/doctest.h>

#include "relative_error.hpp"
#include "sim/model/predict.hpp"
#include "sim/model/published.hpp"

using namespace cpsim;
using namespace cpsim::model;

TEST_CASE("every published point docs/predictions.md cites is predicted within 15%") {
  REQUIRE(published_points().size() == 12 + 8 * 6);  // ring-flash-attention's rows, the FlashAttention-3 sweeps
  for (const PublishedPoint& pt : published_points()) {
    CAPTURE(pt.label);
    CAPTURE(pt.machine);
    CHECK(std::abs(published_error(pt)) <= 0.15);
  }
}

TEST_CASE("a published shape's nearest point is itself, with the error measured there") {
  const PublishedPoint& zigzag = published_points().front();
  const Nearest n = nearest_published(zigzag.problem, zigzag.machine, zigzag.backward);
  CHECK(n.distance == 0);
  CHECK(n.how_far == "the same shape and machine");
  const Cell c = predict_cell(zigzag.problem, {StrategyKind::ring, 0}, load_machine(zigzag.machine), zigzag.backward, 1);
  CHECK(n.error == doctest::Approx(1e6 / c.time_us(zigzag.backward) / zigzag.published - 1));
}

TEST_CASE("a shape away from every published point says how far, in tokens per rank, heads and machine") {
  Problem p = ring_flash_attention_problem(8);
  p.seq = 8 * 2048;
  const Nearest n = nearest_published(p, "a100-sxm-8", true);
  REQUIRE(n.point != nullptr);
  CHECK(n.point->label == "ring-flash-attention zigzag ring, forward+backward");
  CHECK(n.point->machine == "a100-sxm-8");
  CHECK(n.distance == doctest::Approx(2));
  CHECK(n.how_far == "S/C 2K against 8K (4x fewer)");
  CHECK(n.error == doctest::Approx(published_error(*n.point)));
  const Nearest other = nearest_published(p, "h100-sxm-8", true);
  CHECK(other.distance >= n.distance);  // another machine, or a one-GPU rate, is no nearer
}
