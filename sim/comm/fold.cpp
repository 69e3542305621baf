#include "sim/comm/fold.hpp"

#include <cstring>

#include "sim/comm/collectives/reduce.hpp"

namespace cpsim {

void land(void* buf, const void* from, std::size_t n, const Landing& how) {
  if (n == 0) return;
  if (!how.fold) {
    std::memcpy(buf, from, n);
    return;
  }
  const Fold& fold = *how.fold;
  const std::size_t count = n / dtype_size(fold.dtype);
  if (fold.own_first)
    collectives::combine(buf, fold.own, from, count, fold.dtype, fold.op);
  else
    collectives::combine(buf, from, fold.own, count, fold.dtype, fold.op);
}

}  // namespace cpsim
