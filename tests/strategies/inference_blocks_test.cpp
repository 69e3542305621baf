// The block the inference strategies share (sim/strategies/inference_blocks.cpp): computed where a pair is visible,
// skipped and recorded where none is, untouched where a side is empty.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "sim/kernels/cpu_device.hpp"
#include "sim/strategies/inference_blocks.hpp"

using namespace cpsim;

TEST_CASE("attend computes a block with a visible pair, skips one whose keys all come later, and records both") {
  Recorder rec;
  CpuDevice dev(rec);
  const Buffer q = dev.alloc({1, 2, 2, 4}, DType::f64, Layout::bsnd, "q");
  const Buffer k = dev.alloc({1, 3, 1, 4}, DType::f64, Layout::bsnd, "k");
  const Buffer out = dev.alloc({1, 2, 2, 4}, DType::f64, Layout::bsnd, "out");
  const Buffer lse = dev.alloc({1, 2, 2, 1}, DType::f64, Layout::bns, "lse");
  dev.fill(View(lse), -std::numeric_limits<double>::infinity());
  const Mask causal(true);
  // Queries at 10, 11 over keys 0..2: every pair visible; all-zero inputs give lse = log 3.
  CHECK(attend(dev, View(q), Positions{10, 11}, View(k), View(k), Positions{0, 1, 2}, View(out), View(lse), causal, 0));
  CHECK(rec.total_work().pairs == 2 * 2 * 3);
  CHECK(lse.as<double>()[0] == doctest::Approx(std::log(3.0)));
  // Keys 20..22 come after both queries: nothing computed, the skip recorded, lse left as it was.
  dev.fill(View(lse), -std::numeric_limits<double>::infinity());
  CHECK_FALSE(attend(dev, View(q), Positions{10, 11}, View(k), View(k), Positions{20, 21, 22}, View(out), View(lse),
                     causal, 0));
  CHECK(rec.total_work().skipped_calls == 1);
  CHECK(lse.as<double>()[0] == -std::numeric_limits<double>::infinity());
  // No queries: nothing at all.
  CHECK_FALSE(attend(dev, View(q).rows(0, 0), Positions{}, View(k), View(k), Positions{0, 1, 2},
                     View(out).rows(0, 0), View(lse).rows(0, 0), causal, 0));
  CHECK(rec.total_work().skipped_calls == 1);
}
