// Ops for the model's tests that write programs by hand (a clock or a Program fed op by op).
#pragma once
#include <cstdint>

#include "sim/model/program.hpp"

namespace cpsim::model::test_ops {

// A point-to-point post (isend, irecv); `request` as given to Program::push (-1: the program numbers it).
inline Op p2p(OpKind kind, int peer, std::int64_t bytes, int request = -1, int tag = 0) {
  Op op;
  op.kind = kind;
  op.peer = peer;
  op.bytes = bytes;
  op.request = request;
  op.tag = tag;
  return op;
}

inline Op wait(int request) {
  Op op;
  op.kind = OpKind::wait;
  op.request = request;
  return op;
}

}  // namespace cpsim::model::test_ops
