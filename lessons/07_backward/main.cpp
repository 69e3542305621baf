// Lesson 7: the backward pass. Where dQ, dK and dV are produced, and how they reach the ranks that own them.
//
// Three strategies run forward and backward with tracing on. From each rank's recorded events the lesson reads
// which positions its backward attention calls covered (so where partial gradients appear) and which calls
// carried them home: a reduce-scatter (all-gather), a travelling accumulator (ring), all-to-alls (Ulysses).
#include <algorithm>
#include <iostream>

#include "lessons/common/lesson.hpp"
#include "sim/runtime/stepper.hpp"

using namespace cpsim;

namespace {

bool inside(const std::vector<Span>& spans, const SeqLayout& L, int rank) {
  const Positions mine = L.positions(rank);
  for (const Span& sp : spans)
    for (std::int64_t x = sp.lo; x < sp.hi; ++x)
      if (!std::binary_search(mine.begin(), mine.end(), x)) return false;
  return true;
}

RunResult traced(const lesson::Options& o, StrategyKind k) {
  RunConfig c = o.config;
  c.strategy = k;
  c.backward = true;
  c.tracing = true;
  return lesson::run_and_step(c, o);
}

void show_calls(const RunResult& r) {
  std::cout << "  calls on rank 0, forward:  " << lesson::phase_calls(r, 0, "forward") << "\n"
            << "                   backward: " << lesson::phase_calls(r, 0, "backward") << "\n\n";
}

int run_lesson(int argc, char** argv) {
  lesson::Options o;
  Problem& p = o.config.problem;
  p.ranks = 4;
  p.seq = 16;
  p.heads = p.kv_heads = 4;
  p.head_dim = 8;
  if (!lesson::parse_options(argc, argv, "Lesson 7: the backward pass", lesson::kShape | lesson::kStep, o)) return 0;
  p.sharding = Sharding::zigzag;
  for (StrategyKind k : {StrategyKind::all_gather, StrategyKind::ring, StrategyKind::ulysses}) validate(p, k);
  const SeqLayout L(p.ranks, p.seq, p.sharding);
  const int C = p.ranks;

  lesson::title("Lesson 7: the backward pass");
  lesson::say(
      "Backward turns dout into dQ, dK and dV. A query's gradient dQ comes from the attention calls its "
      "rank ran, so it stays where it is. dK and dV are different: a key was read by queries on many "
      "ranks, and each of them produces a piece of its gradient that must reach the key's owner.");

  lesson::banner(1, "all-gather: partial dK/dV over the whole prefix, then a reduce-scatter");
  const RunResult ag = traced(o, StrategyKind::all_gather);
  std::cout << "  rank  dQ rows        partial dK/dV for keys\n";
  for (const StepFrame& f : step_frames(ag)) {
    if (f.phase != "backward" || f.step != 1) continue;
    for (const RankStep& rs : f.ranks) {
      std::vector<Span> q;
      for (const BlockDone& b : rs.blocks) q.insert(q.end(), b.q.begin(), b.q.end());
      lesson::expect(inside(q, L, rs.rank), "dQ is computed on the query's own rank");
      std::cout << "  " << lesson::pad(std::to_string(rs.rank), 6) << lesson::pad(chunk_names(q, L, 'q'), 15)
                << chunk_names(rs.kv_read, L, 'k') << "\n";
    }
  }
  std::cout << "\n";
  lesson::say(
      "Each rank accumulates partial dK/dV into full-length buffers (a key gets a piece from every "
      "local query at or after it), reorders them to rank order and reduce-scatters: each rank receives "
      "the sum of every rank's pieces for its own rows. Backward re-gathers K and V first.");
  show_calls(ag);
  lesson::expect(lesson::phase_calls(ag, 0, "backward") == "all_gather 2, reduce_scatter 2",
                 "all-gather backward: 2 all-gathers (K, V) and 2 reduce-scatters (dK, dV)");

  lesson::banner(2, "ring: the dK/dV accumulator travels with its K/V");
  const RunResult ring = traced(o, StrategyKind::ring);
  std::cout << "  Whose dK/dV accumulator each rank adds to at each backward step:\n";
  std::string header = "  step";
  for (int r = 0; r < C; ++r) header += "  rank " + std::to_string(r);
  lesson::row(header);
  for (const StepFrame& f : step_frames(ring)) {
    if (f.phase != "backward") continue;
    std::string line = "  " + lesson::pad(std::to_string(f.step), 4);
    for (const RankStep& rs : f.ranks) {
      const int owner = L.owner(rs.kv_read.front().lo);
      lesson::expect(owner == (rs.rank + 1 + f.step) % C, "backward step i holds the K/V of rank r + 1 + i");
      for (const BlockDone& b : rs.blocks) lesson::expect(inside(b.q, L, rs.rank), "dQ stays on its rank");
      line += "  " + lesson::pad(std::to_string(owner), 6);
    }
    lesson::row(line);
  }
  std::cout << "\n";
  lesson::say(
      "The backward ring runs the other way (send to r-1), starting from the last K/V the forward held. "
      "At every step a rank adds its block's dK/dV into the accumulator of the K/V it holds, then passes "
      "K/V and accumulator on together. After C-1 hops each accumulator is back at its owner, complete: "
      "C-1 K/V messages and C-1 dK/dV messages per rank.");
  show_calls(ring);
  const std::string hops = std::to_string(2 * (C - 1));
  lesson::expect(lesson::phase_calls(ring, 0, "backward") == (C > 1 ? "irecv " + hops + ", isend " + hops : "none"),
                 "ring backward: C-1 K/V and C-1 dK/dV messages each way");

  lesson::banner(3, "Ulysses: all-to-alls around a local backward");
  const RunResult ul = traced(o, StrategyKind::ulysses);
  lesson::say(
      "dout goes through the same all-to-all as q (sequence sharding to head sharding); each rank runs "
      "an ordinary attention backward over all positions for its " +
      std::to_string(p.heads / C) + " of the " + std::to_string(p.heads) +
      " heads, producing complete dQ, dK, dV for those heads; three inverse all-to-alls return them to "
      "sequence sharding.");
  show_calls(ul);
  lesson::expect(lesson::phase_calls(ul, 0, "backward") == "all_to_all 4",
                 "ulysses backward: 4 all-to-alls (dout, dq, dk, dv)");

  std::cout << "Forward and backward (out, dq, dk, dv), " << C << " ranks, against the reference:\n";
  bool ok = lesson::verdicts(ag, "all_gather");
  ok = lesson::verdicts(ring, "ring") && ok;
  ok = lesson::verdicts(ul, "ulysses") && ok;
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return lesson::guarded("lesson 07_backward", [&] { return run_lesson(argc, argv); });
}
