// Errors a learner can act on.
//   UsageError: the input is impossible (a shape, a flag). The CLI prints its one line and exits 2.
//   Error:      something failed while running (a rank died, a wait timed out, a check could not run).
#pragma once
#include <stdexcept>
#include <string>

namespace cpsim {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// require(ok, "S must be divisible by 2C for zigzag sharding (S=10, C=4)", "use --seq 16")
// throws UsageError("S must be ...; use --seq 16").
inline void require(bool ok, const std::string& constraint, const std::string& fix) {
  if (!ok) throw UsageError(fix.empty() ? constraint : constraint + "; " + fix);
}

}  // namespace cpsim
