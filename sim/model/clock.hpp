// The simulated clock: replays every rank's Program on a modeled Machine and returns each rank's timeline.
//
// Each rank has one compute stream (attention and memory ops run one after another, costs from cost.hpp) and
// posts messages that travel on their own:
//   isend / irecv   post at the rank's current time and do not block. A message starts when both sides have
//                   posted and both the sender's outgoing and the receiver's incoming port are free (one message
//                   at a time per port and direction); it arrives latency + bytes/bw later, which completes both
//                   requests. Ports: a rank's own port at the lowest level (NVLink inside a node); above it
//                   the link its group of the level below assigns it (cost.hpp port_of: between nodes a NIC),
//                   shared by every flow of that group that crosses the link, so a link's rate is divided among
//                   the flows the strategy actually sends through it.
//   wait            blocks until its request is complete: a transfer issued before a compute and waited after it
//                   overlaps that compute exactly as far as the strategy lets it, even several ops later (the ring
//                   backward waits for its dK/dV only before the accumulator is next needed).
//   collective      blocks; starts when the last member arrives, ends after its alpha-beta cost, for all members.
//   contention      while a rank has a transfer in flight, its kernel holds comm_sms SMs and its bytes cross
//                   the rank's memory: an attention op runs at (1 - comm_sms / sm_count) of its rate and a memory
//                   op at (1 - in-flight link rate / hbm) for the time the transfers still run, W:
//                     wall = d + share * min(W, d / (1 - share))          (d: the op alone)
//                   A transfer whose peer has not posted yet is taken to start now (machine.comm_sms = 0: off).
//   step mark       costs framework.step_us + framework.step_bytes_per_element x the rank's output elements /
//                   memory.hbm_gbps on the compute stream (the software stack's cost of one strategy step).
// All ranks start at 0; the backward follows each rank's own forward. Ops are replayed in time order (the rank
// with the earliest clock moves next), so ports are granted first come, first served. A program whose waits
// can never complete is a deadlock and throws Error naming the ranks.
#pragma once
#include <vector>

#include "sim/core/recorder.hpp"
#include "sim/model/machine.hpp"
#include "sim/model/program.hpp"

namespace cpsim::model {

// A rank's modeled times.
struct TimelineSums {
  double forward_end_us = 0;  // when this rank's forward phase ended
  double end_us = 0;          // when its last op ended (forward + backward)
  double compute_us = 0;      // busy on attention
  double memory_us = 0;       // busy on copy / add / merge / fill (and gradient sums outside the kernel)
  double overhead_us = 0;     // costs per strategy step (framework.step_us, step_bytes_per_element)
  double blocked_us = 0;      // in waits and collectives: communication not hidden behind compute
};

struct RankTimeline : TimelineSums {
  Recorder trace;  // with tracing: the modeled timeline, the TraceEvents a measured run records, on modeled time
                   // (and its counters); empty otherwise
};

struct ModeledRun {
  std::vector<RankTimeline> ranks;
  double forward_us = 0;  // the slowest rank's forward
  double total_us = 0;    // the slowest rank's forward + backward
};

struct ClockOptions {
  bool tracing = false;  // keep each rank's Recorder (TraceEvents, counters, phase times); the times above always
};

ModeledRun simulate(const Programs& programs, const Machine& machine, const ClockOptions& options = {});

}  // namespace cpsim::model
