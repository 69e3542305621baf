// The simulated clock on hand-written programs: overlap where the program overlaps (also a transfer waited for
// ops later), collectives wait for their last member, ports carry one message at a time, a NIC is shared by the
// flows that cross it, transfers in flight slow the compute by their share, and impossible programs are refused.
#include "sim/model/clock.hpp"

#include <doctest/doctest.h>

#include "tests/model/ops.hpp"

#include "sim/core/error.hpp"
#include "sim/model/cost.hpp"

using namespace cpsim;
using namespace cpsim::model;

namespace {

using test_ops::p2p;
using test_ops::wait;

// A machine whose costs are easy to follow: 1 TFLOP/s at every block size, 1 GB/s (1000 bytes per microsecond).
Machine simple_machine(int ranks_per_node = 8) {
  Machine m;
  m.name = "simple";
  m.ranks_per_node = ranks_per_node;
  const KernelCurve flat{1, 0};
  m.kernels = {KernelCurves{0, flat, flat, flat, flat}};
  m.sm_count = 1;
  m.launch_us = 0;
  m.hbm_gbps = 1;
  m.intra = Link{2, 1, 1};      // latency 2 us, 1 GB/s
  m.inter = Link{5, 0.5, 0.5};  // latency 5 us, 0.5 GB/s per NIC
  m.nics_per_node = ranks_per_node;
  m.collective_base_us = 1;
  return m;
}

Op attention(double flops) {
  Op op;
  op.kind = OpKind::attention;
  op.flops = flops;
  op.pairs = 100;
  op.q_rows = op.k_rows = 10;
  op.batch_heads = 1;
  return op;
}

Op all_gather(std::int64_t bytes) {
  Op op;
  op.kind = OpKind::collective;
  op.collective = Collective::all_gather;
  op.bytes = bytes;
  return op;
}

Programs programs(std::vector<std::vector<Op>> ops) {
  Programs p;
  std::vector<int> world;
  for (std::size_t r = 0; r < ops.size(); ++r) {
    Program prog;
    prog.rank = static_cast<int>(r);
    for (const Op& op : ops[r]) {
      const int id = prog.push(op);
      if (id >= 0) REQUIRE(id == op.request);  // the requests each test names are posted in order from 0
    }
    p.ranks.push_back(std::move(prog));
    world.push_back(static_cast<int>(r));
  }
  p.groups.push_back(world);
  return p;
}

}  // namespace

TEST_CASE("a transfer posted before a compute and waited after it hides behind the compute") {
  const Machine m = simple_machine();
  const Op work = attention(30e6);  // 30 us at 1 TFLOP/s
  const std::int64_t bytes = 10'000;
  const double compute = attention_us(m, work), transfer = p2p_us(m, bytes, 0, 1);
  REQUIRE(compute > transfer);
  const ModeledRun overlapped = simulate(
      programs({{p2p(OpKind::isend, 1, bytes, 0), work, wait(0)}, {p2p(OpKind::irecv, 0, bytes, 0), work, wait(0)}}),
      m);
  CHECK(overlapped.total_us == doctest::Approx(compute));
  const ModeledRun serial = simulate(
      programs({{work, p2p(OpKind::isend, 1, bytes, 0), wait(0)}, {work, p2p(OpKind::irecv, 0, bytes, 0), wait(0)}}),
      m);
  CHECK(serial.total_us == doctest::Approx(compute + transfer));
  CHECK(serial.ranks[0].blocked_us == doctest::Approx(transfer));
}

TEST_CASE("a receive completes only after the matching send was posted and the transfer time") {
  const Machine m = simple_machine();
  const Op late = attention(50e6);
  const std::int64_t bytes = 4'000;
  const ModeledRun run = simulate(
      programs({{late, p2p(OpKind::isend, 1, bytes, 0), wait(0)}, {p2p(OpKind::irecv, 0, bytes, 0), wait(0)}}), m);
  const double arrives = attention_us(m, late) + p2p_us(m, bytes, 0, 1);
  CHECK(run.ranks[1].end_us == doctest::Approx(arrives));
  CHECK(run.ranks[1].blocked_us == doctest::Approx(arrives));
}

TEST_CASE("a collective starts when its last member arrives and ends together on every member") {
  const Machine m = simple_machine();
  const std::int64_t n = 2'000;
  const ModeledRun run = simulate(programs({{attention(10e6), all_gather(n)}, {attention(50e6), all_gather(n)}}), m);
  const double end = attention_us(m, attention(50e6)) + collective_us(m, Collective::all_gather, {0, 1}, n);
  CHECK(run.ranks[0].end_us == doctest::Approx(end));
  CHECK(run.ranks[1].end_us == doctest::Approx(end));
  CHECK(run.ranks[0].blocked_us == doctest::Approx(end - attention_us(m, attention(10e6))));
}

TEST_CASE("one port carries one message at a time: two sends from a rank arrive one after the other") {
  const Machine m = simple_machine();
  const std::int64_t bytes = 3'000;
  const ModeledRun run =
      simulate(programs({{p2p(OpKind::isend, 1, bytes, 0), p2p(OpKind::isend, 2, bytes, 1), wait(0), wait(1)},
                         {p2p(OpKind::irecv, 0, bytes, 0), wait(0)},
                         {p2p(OpKind::irecv, 0, bytes, 0), wait(0)}}),
               m);
  const double one = p2p_us(m, bytes, 0, 1), busy = one - m.intra.latency_us;
  CHECK(run.ranks[1].end_us == doctest::Approx(one));
  CHECK(run.ranks[2].end_us == doctest::Approx(busy + one));
}

TEST_CASE("ranks on different nodes talk at the network's rate") {
  const Machine m = simple_machine(1);  // one rank per node
  const std::int64_t bytes = 5'000;
  const ModeledRun run =
      simulate(programs({{p2p(OpKind::isend, 1, bytes, 0), wait(0)}, {p2p(OpKind::irecv, 0, bytes, 0), wait(0)}}), m);
  CHECK(run.total_us == doctest::Approx(m.inter.latency_us + bytes / (m.inter.p2p_gbps * 1e3)));
}

TEST_CASE("a wait that nothing can complete is reported as a deadlock naming the rank") {
  const Machine m = simple_machine();
  try {
    simulate(programs({{p2p(OpKind::irecv, 1, 8, 0), wait(0)}, {}}), m);
    FAIL("no deadlock reported");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("deadlock") != std::string::npos);
    CHECK(std::string(e.what()).find("ranks 0") != std::string::npos);
  }
}

TEST_CASE("a receive of a different size than its send is refused") {
  const Machine m = simple_machine();
  CHECK_THROWS_AS(
      simulate(programs({{p2p(OpKind::isend, 1, 8, 0), wait(0)}, {p2p(OpKind::irecv, 0, 16, 0), wait(0)}}), m), Error);
}

TEST_CASE("the modeled timeline is a trace: compute events of a rank follow one another without overlap") {
  const Machine m = simple_machine();
  const std::int64_t bytes = 10'000;
  Op begin;
  begin.kind = OpKind::begin_phase;
  begin.name = "forward";
  Op end = begin;
  end.kind = OpKind::end_phase;
  const ModeledRun run =
      simulate(programs({{begin, p2p(OpKind::isend, 1, bytes, 0), attention(5e6), attention(7e6), wait(0), end},
                         {begin, p2p(OpKind::irecv, 0, bytes, 0), attention(5e6), wait(0), end}}),
               m, {.tracing = true});
  const auto& events = run.ranks[0].trace.events();
  double last_end = 0;
  int computes = 0, comms = 0;
  for (const auto& e : events) {
    if (e.type == TraceEvent::Type::compute) {
      CHECK(e.start_us >= last_end - 1e-9);
      CHECK(e.phase == "forward");
      last_end = e.start_us + e.dur_us;
      ++computes;
    }
    if (e.type == TraceEvent::Type::comm) {
      CHECK(e.name == "isend");
      CHECK(e.bytes_sent == bytes);
      ++comms;
    }
  }
  CHECK(computes == 2);
  CHECK(comms == 1);
  CHECK(run.forward_us == doctest::Approx(std::max(last_end, p2p_us(m, bytes, 0, 1))));
}

TEST_CASE("a transfer posted after one block and waited for only after the next hides behind the next block") {
  // The ring backward's dK/dV: posted when a block is done, waited for just before the accumulator is needed.
  const Machine m = simple_machine();
  const Op block = attention(40e6);   // 40 us
  const std::int64_t bytes = 20'000;  // 22 us on the link
  REQUIRE(p2p_us(m, bytes, 0, 1) < attention_us(m, block));
  const ModeledRun late = simulate(programs({{block, p2p(OpKind::isend, 1, bytes, 0), block, wait(0)},
                                             {block, p2p(OpKind::irecv, 0, bytes, 0), block, wait(0)}}),
                                   m);
  CHECK(late.total_us == doctest::Approx(2 * attention_us(m, block)));
  CHECK(late.ranks[0].blocked_us == doctest::Approx(0));
  const ModeledRun now = simulate(programs({{block, p2p(OpKind::isend, 1, bytes, 0), wait(0), block},
                                            {block, p2p(OpKind::irecv, 0, bytes, 0), wait(0), block}}),
                                  m);
  CHECK(now.total_us == doctest::Approx(2 * attention_us(m, block) + p2p_us(m, bytes, 0, 1)));
}

TEST_CASE("a node's NIC carries the flows that cross it one after another, and a lone flow gets all of it") {
  // Two nodes of 4 ranks. Ranks 0 and 1 both send to the other node at once.
  Machine m = simple_machine(4);
  const std::int64_t bytes = 5'000;
  const auto two_flows = programs({{p2p(OpKind::isend, 4, bytes, 0), wait(0)},
                                   {p2p(OpKind::isend, 5, bytes, 0), wait(0)},
                                   {},
                                   {},
                                   {p2p(OpKind::irecv, 0, bytes, 0), wait(0)},
                                   {p2p(OpKind::irecv, 1, bytes, 0), wait(0)}});
  const double one = p2p_us(m, bytes, 0, 4), busy = one - m.inter.latency_us;
  CHECK(one == doctest::Approx(m.inter.latency_us + bytes / (m.inter.p2p_gbps * 1e3)));  // a lone flow: the NIC
  m.nics_per_node = 1;  // both flows cross the one NIC: the second waits for the first
  const ModeledRun shared = simulate(two_flows, m);
  CHECK(std::max(shared.ranks[4].end_us, shared.ranks[5].end_us) == doctest::Approx(busy + one));
  m.nics_per_node = 4;  // a NIC per GPU: side by side
  const ModeledRun own = simulate(two_flows, m);
  CHECK(std::max(own.ranks[4].end_us, own.ranks[5].end_us) == doctest::Approx(one));
}

TEST_CASE("a transfer in flight slows the compute it overlaps by its share of the SMs, and only while it runs") {
  Machine m = simple_machine();
  m.sm_count = 10;
  const Op block = attention(100e6);  // 100 us alone (10 SMs, the block fills them)
  Op wide = block;
  wide.batch_heads = 10;  // 10 tiles: the whole machine
  wide.pairs = 1000;      // every pair of the 10 heads visible
  const double alone = attention_us(m, wide);
  const std::int64_t bytes = 30'000;  // 30 us of transfer
  const double busy = p2p_us(m, bytes, 0, 1) - m.intra.latency_us;
  const auto overlapped =
      programs({{p2p(OpKind::isend, 1, bytes, 0), wide, wait(0)}, {p2p(OpKind::irecv, 0, bytes, 0), wide, wait(0)}});
  CHECK(simulate(overlapped, m).total_us == doctest::Approx(alone));  // comm_sms = 0: no contention
  m.comm_sms = 2;  // the transfer holds 2 of 10 SMs while it moves: the block runs at 80% for `busy` us
  const double share = 0.2;
  CHECK(simulate(overlapped, m).total_us == doctest::Approx(alone + share * busy));
}

TEST_CASE("a strategy step costs the machine's fixed cost per step; a merge costs the stack's bytes per element") {
  Machine m = simple_machine();
  Op step;
  step.kind = OpKind::step;
  step.step = 0;
  Op merge;
  merge.kind = OpKind::memory;
  merge.name = "merge";
  merge.bytes = 3'000;
  merge.elements = 500;
  const auto prog = programs({{step, merge, step}});
  CHECK(simulate(prog, m).total_us == doctest::Approx(3.0));  // 3000 bytes at 1 GB/s
  m.step_us = 10;
  m.merge_bytes_per_element = 38;  // 500 x 38 = 19000 bytes
  const ModeledRun run = simulate(prog, m);
  CHECK(run.total_us == doctest::Approx(2 * 10 + 19.0));
  CHECK(run.ranks[0].overhead_us == doctest::Approx(20));
}

TEST_CASE("a strategy step also moves the stack's bytes per element of the rank's output at the memory's rate") {
  Machine m = simple_machine();  // 1 GB/s: 1000 bytes a microsecond
  Op step;
  step.kind = OpKind::step;
  step.step = 0;
  Programs prog = programs({{step, step}, {step}});
  prog.ranks[0].out_elements = 4'000;
  prog.ranks[1].out_elements = 1'000;
  m.step_us = 1;
  m.step_bytes_per_element = 12;  // rank 0: 48000 bytes a step, 48 us; rank 1: 12 us
  const ModeledRun run = simulate(prog, m);
  CHECK(run.ranks[0].overhead_us == doctest::Approx(2 * (1 + 48.0)));
  CHECK(run.ranks[1].overhead_us == doctest::Approx(1 + 12.0));
  CHECK(run.total_us == doctest::Approx(2 * 49.0));
}
