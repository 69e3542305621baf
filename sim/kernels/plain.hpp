// The plain single-precision baseline: the textbook attention loops of reference.hpp, every operation in float.
//
// flash-attention's correctness rule compares a kernel with an f64 reference and allows at most twice the error
// that this plain f32 implementation makes against the same reference (check.hpp applies the rule).
// Inputs are rounded to float first; pass float-representable values (round_to_dtype) so that the reference sees
// exactly the inputs the f32 kernels see. Results are returned widened to double, in the reference's layout.
#pragma once
#include <vector>

#include "sim/kernels/reference.hpp"

namespace cpsim {

RefForward plain_forward_f32(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                             const AttentionShape& shape, const Positions& q_pos, const Positions& k_pos,
                             const Mask& mask, double scale = 0);

RefBackward plain_backward_f32(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                               const std::vector<double>& dout, const AttentionShape& shape, const Positions& q_pos,
                               const Positions& k_pos, const Mask& mask, double scale = 0);

}  // namespace cpsim
