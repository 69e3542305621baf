#include "sim/comm/fold.hpp"

#include <cstring>

#include "sim/comm/collectives/reduce.hpp"
#include "sim/comm/copy.hpp"

namespace cpsim {

void land(void* buf, const void* from, std::size_t offset, std::size_t n, const Landing& how) {
  if (n == 0) return;
  auto* to = static_cast<std::byte*>(buf) + offset;
  if (!how.fold) {
    if (how.cached)
      std::memcpy(to, from, n);
    else
      copy_bytes(to, from, n, how.call_bytes);
    return;
  }
  const Fold* fold = &*how.fold;
  const auto* own = static_cast<const std::byte*>(fold->own) + offset;
  const std::size_t count = n / dtype_size(fold->dtype);
  if (fold->own_first)
    collectives::combine(to, own, from, count, fold->dtype, fold->op);
  else
    collectives::combine(to, from, own, count, fold->dtype, fold->op);
}

}  // namespace cpsim
