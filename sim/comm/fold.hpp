// How a receive lands its message: copied into the receive buffer, or folded into it.
//
// A fold is receive-and-reduce: buf[i] = op(message[i], own[i]), where own is memory the receiving rank owns
// (its own contribution, or the partial result buf itself), or op(own[i], message[i]) with own_first: the
// order of the operands is kept exactly, so that every algorithm can reproduce one order of operations bit
// for bit (max(+0, -0) is +0 but max(-0, +0) is -0).
//
// The arithmetic happens while the message arrives, so a reduce-scatter step passes over its data once (read
// the message and own, write buf: 3n bytes of memory traffic for an n-byte message) instead of twice (copy
// the message, 2n; then combine it with own, 3n). NCCL's ring reduce-scatter kernel fuses the same way: its
// middle steps are recvReduceSend (NVIDIA/nccl, src/device/reduce_scatter.h).
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

// How a receive lands its message: a copy (streamed past the caches when large, copy.hpp), a copy kept in the
// caches because its caller reads the data again at once (reduce-scatter's partial sum), or a fold.
struct Landing {
  std::optional<Fold> fold;    // set: receive-and-reduce
  bool cached = false;         // a copy that is never streamed
  std::size_t call_bytes = 0;  // a copy that is part of a call landing this many bytes in all (copy_bytes)

  static Landing kept_in_cache() { return Landing{{}, true, 0}; }
  static Landing part_of(std::size_t call_bytes) { return Landing{{}, false, call_bytes}; }
};

// Lands bytes [offset, offset + n) of a message, read from `from`, in buf, as `how` says (with a fold, offset and n
// are whole elements of its dtype).
void land(void* buf, const void* from, std::size_t offset, std::size_t n, const Landing& how);

}  // namespace cpsim
