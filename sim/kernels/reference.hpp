// The plain definition of attention, computed in double: what every kernel and every strategy is checked against.
//
// For batch b, query head h (kv head g = h / (Nq / Nkv)), query row i and the keys j it sees
// (mask.visible(q_pos[i], k_pos[j]), sim/core/mask.hpp; causal: k_pos[j] <= q_pos[i]; full: every j):
//   s_ij  = scale * q_i . k_j                       scale = 1 / sqrt(D) unless given
//   lse_i = log sum_j exp(s_ij)                     (-inf when row i sees no key)
//   p_ij  = exp(s_ij - lse_i)
//   out_i = sum_j p_ij v_j                          (0 when row i sees no key)
// Backward, for an upstream gradient dout:
//   dv_j += sum_i p_ij dout_i
//   dp_ij = dout_i . v_j
//   D_i   = sum_j p_ij dp_ij  (= dout_i . out_i)
//   ds_ij = p_ij (dp_ij - D_i)
//   dq_i  = scale * sum_j ds_ij k_j,   dk_j += scale * sum_i ds_ij q_i
// Positions are global token indices (ascending runs); no tiling, no online softmax.
#pragma once
#include <cstdint>
#include <vector>

#include "sim/core/mask.hpp"
#include "sim/core/positions.hpp"

namespace cpsim {

struct AttentionShape {
  std::int64_t B, Sq, Sk, Nq, Nkv, D;
};

struct RefForward {
  std::vector<double> out;  // [B, Sq, Nq, D]
  std::vector<double> lse;  // [B, Nq, Sq]
};

struct RefBackward {
  std::vector<double> dq;  // [B, Sq, Nq, D]
  std::vector<double> dk;  // [B, Sk, Nkv, D]
  std::vector<double> dv;  // [B, Sk, Nkv, D]
};

// q: [B, Sq, Nq, D], k, v: [B, Sk, Nkv, D]. Throws Error when sizes disagree with the shape.
RefForward reference_forward(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                             const AttentionShape& shape, const Positions& q_pos, const Positions& k_pos,
                             const Mask& mask, double scale = 0);

// dout: [B, Sq, Nq, D]. Recomputes the forward itself.
RefBackward reference_backward(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                               const std::vector<double>& dout, const AttentionShape& shape, const Positions& q_pos,
                               const Positions& k_pos, const Mask& mask, double scale = 0);

// Checks a shape and the sizes of q, k, v (and dout when given) against it; throws Error naming the mismatch.
void check_reference_args(const AttentionShape& shape, std::size_t q, std::size_t k, std::size_t v,
                          const Positions& q_pos, const Positions& k_pos);

// 1/sqrt(D) when scale is 0.
double attention_scale(std::int64_t head_dim, double scale);

}  // namespace cpsim
