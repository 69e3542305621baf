// The program one rank issued: every operation a strategy asked of its device and communicator, in order.
//
// The counting device and communicator (counting_device.hpp, counting_comm.hpp) append to it while the unchanged
// strategy code runs; the simulated clock (clock.hpp) replays it on a modeled machine. Ops carry sizes only:
//   attention  flops, visible pairs, the block's rows, (batch x heads) and head dim, forward or backward; backward:
//              the dq, dk, dv elements it adds to
//   memory     a copy / add / merge / fill on the rank's device: bytes read + written (merge: also its elements)
//   isend      a message to `peer` (world rank) with `tag` and `bytes`, completed by wait(request)
//   irecv      a message from `peer`, completed by wait(request)
//   wait       blocks until `request` (an isend or irecv of this rank) is complete
//   collective all_gather / reduce_scatter / all_to_all / all_reduce / barrier on communicator `context`,
//              `bytes` per rank as the Communicator call was given them (see communicator.hpp)
//   phase      begin ("forward") or end of a timed phase;  step: a strategy's step mark
// Requests are numbered per rank from 0. A communicator is named by its `context` (0: the world; its members are
// Programs::groups[context]), a collective by its sequence number on it, so members of one call find each other.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/recorder.hpp"

namespace cpsim::model {

enum class OpKind : std::uint8_t { attention, memory, isend, irecv, wait, collective, begin_phase, end_phase, step };
const char* op_kind_name(OpKind k);

enum class Collective : std::uint8_t { all_gather, reduce_scatter, all_to_all, all_reduce, barrier };
const char* collective_name(Collective c);

struct Op {
  OpKind kind = OpKind::attention;
  // attention
  bool backward = false;
  BlockKind block = BlockKind::full;
  double flops = 0;
  std::int64_t pairs = 0;               // visible (query, key) pairs, summed over batch and heads
  std::int64_t q_rows = 0, k_rows = 0;  // the block: [q_rows] x [k_rows] positions
  std::int64_t batch_heads = 0;         // B x Nq of the call
  std::int64_t head_dim = 0;            // D
  std::vector<Span> q_spans, k_spans;   // the positions, for the trace (when Program::spans)
  // memory: name is "copy", "add", "merge" or "fill"
  std::string name;
  std::int64_t bytes = 0;  // memory: moved; p2p: the message; collective: per rank (see above)
  std::int64_t elements = 0;  // merge: the accumulator's elements; backward attention: dq + dk + dv elements
  // point to point
  int peer = -1, tag = 0, request = -1;
  // collective
  Collective collective = Collective::barrier;
  int context = 0;            // p2p and collectives: the communicator (index into Programs::groups)
  std::int64_t sequence = 0;  // collective: the call's number on its communicator
  // phase / step marks
  int step = -1;  // step mark: the step; phase marks: name holds the phase
};

struct Program {
  int rank = 0;
  std::vector<Op> ops;
  int requests = 0;    // requests issued so far (the next request id)
  bool spans = false;  // keep every attention op's positions as spans (for traces; costs time at large S)
};

// Every rank's program and the communicators they name: groups[context] = its world ranks, in its rank order.
struct Programs {
  std::vector<Program> ranks;
  std::vector<std::vector<int>> groups;
};

}  // namespace cpsim::model
