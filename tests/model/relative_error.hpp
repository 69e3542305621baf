// How far a modeled figure is from a published one, as a fraction of the published one: |model / published - 1|.
// doctest's Approx(x).epsilon(e) scales e by max(|model|, |published|) + 1, which lets a figure above the published
// one (and any figure near 1, such as a fraction of one GPU's rate) pass by more than e; the model's bounds against
// publications are stated as this instead.
#pragma once

#include <cmath>

namespace cpsim::model {

inline double relative_error(double model, double published) {
  return std::abs(model / published - 1);
}

}  // namespace cpsim::model
