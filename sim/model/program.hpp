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
// Programs::groups[context]); its members call its collectives in one order, so the k-th call of each member is
// one call.
//
// Stored as repeated segments. The ops from one mark (step or phase) to the next are a segment; a segment that
// repeats the one before it (the same ops, sizes, peers and tags, requests at the same distances, the step mark
// one stride further) is not stored again: the one before counts one more repetition. The ring's C - 1 steps issue
// the same ops on different chunks, so a rank's program holds a few segments however many steps it takes: the
// memory of the programs grows with C, not C^2, while every op is still replayed in order (ProgramCursor).
// Attention ops that keep their positions (Program::spans, for traces) differ from step to step and are all kept.
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
  std::int64_t kv_group = 1;            // Nq / Nkv: query heads per KV head (GQA)
  std::int64_t head_dim = 0;            // D
  std::vector<Span> q_spans, k_spans;   // the positions, for the trace (when Program::spans)
  // memory: name is "copy", "add", "merge" or "fill"
  std::string name;
  std::int64_t bytes = 0;  // memory: moved; p2p: the message; collective: per rank (see above); attention: K and V
  std::int64_t elements = 0;  // merge: the accumulator's elements; backward attention: dq + dk + dv elements
  // point to point
  int peer = -1, tag = 0, request = -1;  // request: as given to Program::push; stored relative (Segment)
  // collective
  Collective collective = Collective::barrier;
  int context = 0;  // p2p and collectives: the communicator (index into Programs::groups)
  // phase / step marks
  int step = -1;  // step mark: the step; phase marks: name holds the phase
};

// Every field equal, the positions included.
bool same_op(const Op& a, const Op& b);

// One segment: `ops` issued `repeats` times in a row. Requests are relative to the first request of the
// repetition (a wait may name a request of an earlier one: < 0); each repetition posts `posts` requests, and a
// step mark's step grows by `step_stride` per repetition.
struct Segment {
  std::vector<Op> ops;
  std::int64_t repeats = 1;
  int posts = 0;
  int step_stride = 0;
};

class Program {
 public:
  int rank = 0;
  bool spans = false;  // keep every attention op's positions as spans (for traces; costs time at large S)
  // The elements of the rank's output, B x its query rows x Nq x D: what a step's per-element cost moves
  // (framework.step_bytes_per_element, clock.hpp).
  std::int64_t out_elements = 0;

  // Appends an op. An isend or irecv is given the next request id, which is returned (-1 for other ops); a wait
  // names its request by that id.
  int push(Op op);
  // Appends a mark that costs nothing: a phase's begin or end, or a step's start, named by its phase.
  void mark(OpKind kind, const std::string& phase, int step = -1);

  int requests() const { return requests_; }  // requests issued
  std::int64_t size() const;                  // ops issued, every repetition counted
  std::size_t stored() const;                 // ops held
  const std::vector<Segment>& segments() const { return segments_; }
  // Every op in order, with absolute request ids and steps (small programs: tests, a trace).
  std::vector<Op> expand() const;

 private:
  void close();  // the last segment is complete: fold it into the one before it when it repeats it

  std::vector<Segment> segments_;
  std::vector<Op> spare_;  // the storage of the last segment folded away, for the next one
  int requests_ = 0;  // requests issued
  int base_ = 0;      // requests issued before the last segment began
};

// Walks a program's ops in order, every repetition of every segment.
class ProgramCursor {
 public:
  explicit ProgramCursor(const Program& p);
  bool done() const { return segment_ >= segments_->size(); }
  const Op& op() const { return (*segments_)[segment_].ops[index_]; }
  int request() const { return base_ + op().request; }  // the op's request id (isend, irecv, wait)
  int step() const;                                     // a step mark's step
  void next();

 private:
  void skip_empty();

  const std::vector<Segment>* segments_;
  std::size_t segment_ = 0, index_ = 0;
  std::int64_t repetition_ = 0;
  int base_ = 0;  // requests issued before this repetition
};

// Every rank's program and the communicators they name: groups[context] = its world ranks, in its rank order.
struct Programs {
  std::vector<Program> ranks;
  std::vector<std::vector<int>> groups;
};

}  // namespace cpsim::model
