#include "sim/kernels/reference.hpp"

#include <cmath>
#include <string>

#include "sim/core/error.hpp"
#include "sim/kernels/naive.hpp"

namespace cpsim {

double attention_scale(std::int64_t head_dim, double scale) {
  return scale > 0 ? scale : 1.0 / std::sqrt(static_cast<double>(head_dim));
}

void check_reference_args(const AttentionShape& sh, std::size_t q, std::size_t k, std::size_t v, const Positions& q_pos,
                          const Positions& k_pos) {
  auto fail = [](const std::string& m) { throw Error("reference attention: " + m); };
  if (sh.B < 1 || sh.Sq < 0 || sh.Sk < 0 || sh.Nq < 1 || sh.Nkv < 1 || sh.D < 1) fail("shape has an empty extent");
  if (sh.Nq % sh.Nkv != 0) fail("query heads must be a multiple of kv heads");
  const auto n = [](auto x) { return static_cast<std::size_t>(x); };
  if (q != n(sh.B * sh.Sq * sh.Nq * sh.D)) fail("q has " + std::to_string(q) + " values, not B*Sq*Nq*D");
  if (k != n(sh.B * sh.Sk * sh.Nkv * sh.D)) fail("k has " + std::to_string(k) + " values, not B*Sk*Nkv*D");
  if (v != k) fail("v and k differ in size");
  if (q_pos.size() != sh.Sq) fail("q_pos must hold Sq positions");
  if (k_pos.size() != sh.Sk) fail("k_pos must hold Sk positions");
}

RefForward reference_forward(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                             const AttentionShape& shape, const Positions& q_pos, const Positions& k_pos,
                             const Mask& mask, double scale) {
  return naive::forward<double>(q, k, v, shape, q_pos, k_pos, mask, scale);
}

RefBackward reference_backward(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                               const std::vector<double>& dout, const AttentionShape& shape, const Positions& q_pos,
                               const Positions& k_pos, const Mask& mask, double scale) {
  return naive::backward<double>(q, k, v, dout, shape, q_pos, k_pos, mask, scale);
}

}  // namespace cpsim
