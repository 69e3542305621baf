// A program stored as repeated segments: a step that repeats the one before it is counted, not stored again, and
// every op still comes back in order with its request ids and step.
#include "sim/model/program.hpp"

#include <doctest/doctest.h>

#include "tests/model/ops.hpp"

using namespace cpsim;
using namespace cpsim::model;

namespace {

using test_ops::p2p;
using test_ops::wait;

Op mark(OpKind kind, int step = -1) {
  Op op;
  op.kind = kind;
  op.step = step;
  op.name = "forward";
  return op;
}

Op attention(std::int64_t pairs) {
  Op op;
  op.kind = OpKind::attention;
  op.pairs = pairs;
  op.flops = 4.0 * static_cast<double>(pairs);
  return op;
}

// A ring-like program: step i posts a send and a receive, computes, and waits for this step's receive and the
// previous step's send (a request of the repetition before). Blocks of `pairs[i]` pairs.
Program ring_like(const std::vector<std::int64_t>& pairs) {
  Program p;
  p.push(mark(OpKind::begin_phase));
  int last_send = -1;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    p.push(mark(OpKind::step, static_cast<int>(i)));
    const int send = p.push(p2p(OpKind::isend, 1, 64)), recv = p.push(p2p(OpKind::irecv, 3, 64));
    p.push(attention(pairs[i]));
    p.push(wait(recv));
    if (last_send >= 0) p.push(wait(last_send));
    last_send = send;
  }
  p.push(wait(last_send));
  p.push(mark(OpKind::end_phase));
  return p;
}

}  // namespace

TEST_CASE("steps that repeat the one before are stored once with a count, and come back in order with their ids") {
  // Step 0 (no earlier send to wait for), steps 1-3 alike, steps 4-5 alike but a larger block, step 6 as 4-5 but
  // followed by the last wait.
  const Program p = ring_like({10, 20, 20, 20, 30, 30, 30});
  CHECK(p.requests() == 14);
  CHECK(p.segments().size() == 6);  // begin, step 0, steps 1-3, steps 4-5, step 6, end
  CHECK(p.segments()[2].repeats == 3);
  CHECK(p.segments()[2].step_stride == 1);
  CHECK(p.segments()[3].repeats == 2);
  CHECK(p.stored() < static_cast<std::size_t>(p.size()));
  const std::vector<Op> ops = p.expand();
  CHECK(static_cast<std::int64_t>(ops.size()) == p.size());
  // Every op as issued: step marks 0..5, request ids in posting order, each wait on the id it named.
  int step = 0, posted = 0;
  std::vector<int> waited;
  for (const Op& op : ops) {
    if (op.kind == OpKind::step) CHECK(op.step == step++);
    if (op.kind == OpKind::isend || op.kind == OpKind::irecv) CHECK(op.request == posted++);
    if (op.kind == OpKind::wait) waited.push_back(op.request);
  }
  CHECK(step == 7);
  CHECK(posted == 14);
  // Step i waits for its receive (2i + 1), then the send of step i - 1 (2i - 2); the last send at the end.
  const std::vector<int> want = {1, 3, 0, 5, 2, 7, 4, 9, 6, 11, 8, 13, 10, 12};
  CHECK(waited == want);
}

TEST_CASE("a step that differs in any field, or breaks the step stride, starts a segment of its own") {
  CHECK(ring_like({10, 10, 11, 10}).segments().size() == 6);  // begin, 0, 1, 2, 3, end: 1 and 3 are not adjacent
  Program p;
  for (int s : {0, 1, 2, 4}) {  // step 4 breaks the stride of 1
    p.push(mark(OpKind::step, s));
    p.push(attention(5));
  }
  REQUIRE(p.segments().size() == 2);
  CHECK(p.segments()[0].repeats == 3);
  CHECK(p.expand()[6].step == 4);
}

TEST_CASE("positions kept for a trace make every attention op its own, so nothing is folded that differs") {
  Program p;
  for (int s = 0; s < 4; ++s) {
    p.push(mark(OpKind::step, s));
    Op op = attention(5);
    op.q_spans = {Span{0, 4}};
    op.k_spans = {Span{4 * s, 4 * s + 4}};
    p.push(op);
  }
  CHECK(p.segments().size() == 4);
  CHECK(p.stored() == 8);
}
