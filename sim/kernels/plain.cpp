#include "sim/kernels/plain.hpp"

#include "sim/kernels/naive.hpp"

namespace cpsim {

RefForward plain_forward_f32(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                             const AttentionShape& shape, const Positions& q_pos, const Positions& k_pos,
                             const Mask& mask, double scale) {
  return naive::forward<float>(q, k, v, shape, q_pos, k_pos, mask, scale);
}

RefBackward plain_backward_f32(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                               const std::vector<double>& dout, const AttentionShape& shape, const Positions& q_pos,
                               const Positions& k_pos, const Mask& mask, double scale) {
  return naive::backward<float>(q, k, v, dout, shape, q_pos, k_pos, mask, scale);
}

}  // namespace cpsim
