// How a receive lands its message: copied into the receive buffer, or folded into it.
//
// A fold is receive-and-reduce: buf[i] = op(message[i], own[i]), where own is memory the receiving rank owns
// (its own contribution, or the partial result buf itself), or op(own[i], message[i]) with own_first: the
// order of the operands is kept exactly, so that every algorithm can reproduce one order of operations bit
// for bit (max(+0, -0) is +0 but max(-0, +0) is -0).
//
// The arithmetic happens while the message arrives, so a reduce-scatter step passes over its data once (read
// the message and own, write buf) instead of twice (copy the message; then combine it with own). NCCL's ring
// reduce-scatter kernel fuses the same way: its middle steps are recvReduceSend (NVIDIA/nccl,
// src/device/reduce_scatter.h).
#pragma once
#include <cstddef>
#include <optional>

#include "sim/comm/communicator.hpp"
#include "sim/core/dtype.hpp"

namespace cpsim {

struct Fold {
  const void* own = nullptr;  // as many bytes as the message
  DType dtype = DType::f32;
  ReduceOp op = ReduceOp::sum;
  bool own_first = false;  // op(own, message) instead of op(message, own)
};

// How a receive lands its message: a copy (no fold), or a fold.
struct Landing {
  std::optional<Fold> fold;
};

// Lands the n bytes of a message, read from `from`, in buf, as `how` says (with a fold, n is whole elements of its
// dtype).
void land(void* buf, const void* from, std::size_t n, const Landing& how);

}  // namespace cpsim
