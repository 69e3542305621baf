// Lesson 3: ring attention over contiguous chunks.
//
// Q stays on its rank while K/V travel around the ring. The lesson runs the library's ring strategy on
// contiguous sharding with tracing on, replays every step (who holds whose K/V, which block it computes),
// reads the work each rank counted in three units (ring blocks computed [1, 2, 3, 4] at C=4; t x t blocks
// [2, 6, 10, 14], lesson 5's unit; visible pairs) and shows, from those counts, why the busiest rank sets the
// pace of every step.
#include <algorithm>
#include <iostream>
#include <numeric>
#include <sstream>

#include "lessons/common/lesson.hpp"
#include "sim/layout/work_table.hpp"
#include "sim/runtime/stepper.hpp"

using namespace cpsim;

namespace {

int run_lesson(int argc, char** argv) {
  lesson::Options o;
  o.mask_refusal =
      "lesson 3 counts the blocks the causal mask lets a ring rank skip and takes no --docs or "
      "--window; `cpsim run --strategy ring --docs ... --check` runs the ring under a mask, and lesson "
      "12 (lessons/12_documents) teaches masks";
  Problem& p = o.config.problem;
  p.ranks = 4;
  p.seq = 16;
  p.heads = p.kv_heads = 2;
  p.head_dim = 8;
  p.sharding = Sharding::contiguous;
  if (!lesson::parse_options(argc, argv, "Lesson 3: ring attention", lesson::kShape | lesson::kStep, o)) return 0;
  o.config.strategy = StrategyKind::ring;
  o.config.tracing = true;
  validate(p, StrategyKind::ring);
  const SeqLayout L(p.ranks, p.seq, p.sharding);
  const int C = p.ranks;

  lesson::title("Lesson 3: ring attention over contiguous chunks");
  lesson::shape(o.config.problem);
  lesson::say(
      "Ring attention leaves the heads alone. Each rank keeps its queries; the key/value blocks travel "
      "around a ring, rank r sending to r+1 and receiving from r-1. After C steps every query block has "
      "met every K/V block, and the partial results are merged by their log-sum-exp (lesson 4).");

  lesson::banner(1, "contiguous shards and the ring");
  for (int r = 0; r < C; ++r)
    std::cout << "  rank " << r << " owns positions [" << L.spans(r).front().lo << ", " << L.spans(r).back().hi
              << "), sends K/V to rank " << (r + 1) % C << ", receives from rank " << (r - 1 + C) % C << "\n";
  std::cout << "\n";

  lesson::banner(2, "every step of the forward ring, replayed from the trace");
  const RunResult r = lesson::run_and_step(o.config, o);
  const auto frames = step_frames(r);
  for (const RankReport& rk : r.ranks)
    for (const TraceEvent& e : rk.stats.events())
      if (e.type == TraceEvent::Type::comm && e.name == "isend")
        lesson::expect(e.peer == (rk.rank + 1) % C, "rank r sends its K/V to rank r+1");
  std::cout << "Whose K/V each rank holds at each step (from the keys its attention call read):\n";
  std::string header = "  step";
  for (int rank = 0; rank < C; ++rank) header += "  rank " + std::to_string(rank);
  lesson::row(header);
  for (const StepFrame& f : frames) {
    if (f.phase != "forward") continue;
    std::string line = "  " + lesson::left(std::to_string(f.step), 4);
    for (const RankStep& rs : f.ranks) {
      const int owner = L.owner(rs.kv_read.front().lo);
      lesson::expect(owner == ((rs.rank - f.step) % C + C) % C, "at step i rank r holds the K/V of rank r - i");
      for (const BlockDone& b : rs.blocks)
        lesson::expect((b.kind == BlockKind::skipped) == (owner > rs.rank), "a rank skips exactly the later K/V");
      line += "  " + lesson::left(std::to_string(owner), 6);
    }
    lesson::row(line);
  }
  std::cout << "\n";
  if (!o.last_run_replayed)
    for (const StepFrame& f : frames)
      if (f.phase == "forward") std::cout << format_frame(f, r) << "\n";
  lesson::say(
      "A K/V block that starts after a rank's last query is invisible to all of its queries "
      "(causal mask), so that rank skips it: it computes nothing and waits for the next block.");

  lesson::banner(3, "the work per rank, in visible pairs");
  std::vector<std::int64_t> blocks, pairs;
  for (const RankReport& rk : r.ranks) {
    blocks.push_back(rk.stats.total_work().calls);
    pairs.push_back(rk.stats.total_work().pairs);
  }
  const auto table = ring_blocks(L);
  lesson::expect(std::equal(blocks.begin(), blocks.end(), table.begin()), "recorded blocks equal the work table");
  const std::int64_t bh = p.batch * p.heads, s = p.seq / C;  // pairs are summed over batch and heads
  std::cout << "  rank  visible pairs  per (batch, head)  the chapter's ring blocks\n";
  for (int rank = 0; rank < C; ++rank) {
    const std::int64_t x = pairs[static_cast<std::size_t>(rank)];
    std::cout << "  " << lesson::left(std::to_string(rank), 6) << lesson::left(std::to_string(x), 15)
              << lesson::left(std::to_string(x / bh), 19) << blocks[static_cast<std::size_t>(rank)] << "\n";
  }
  std::cout << "  visible pairs: query-key pairs the mask lets through, summed over " << p.heads << " heads and\n"
            << "  batch " << p.batch << "; the chapter's ring blocks: the blocks its ring program computes\n\n";
  const bool contiguous = p.sharding == Sharding::contiguous;
  for (int rank = 0; contiguous && rank < C; ++rank)
    lesson::expect(pairs[static_cast<std::size_t>(rank)] == bh * (rank * s * s + s * (s + 1) / 2) &&
                       blocks[static_cast<std::size_t>(rank)] == rank + 1,
                   "rank r: r whole blocks and the diagonal one, r + 1 blocks");
  const std::int64_t first = pairs.front() / bh, last = pairs.back() / bh;
  lesson::say(
      "cpsim counts work in one unit, visible pairs, which is what the time follows. The handbook chapter's "
      "ring program counts blocks computed, " +
      lesson::list(blocks) +
      (contiguous ? ", and they follow from the pairs: with s = S/C = " + std::to_string(s) +
                        " tokens a rank, rank r's queries see r whole blocks of s^2 = " + std::to_string(s * s) +
                        " pairs and the diagonal one's s(s+1)/2 = " + std::to_string(s * (s + 1) / 2) + ", so r x " +
                        std::to_string(s * s) + " + " + std::to_string(s * (s + 1) / 2) +
                        " pairs per (batch, head) in r + 1 blocks"
                  : "") +
      ". A block counts 1 whole or on the diagonal, so blocks are not proportional to work: rank " +
      std::to_string(C - 1) + "'s " + std::to_string(blocks.back()) + " blocks hold " + std::to_string(last) +
      " pairs per (batch, head), " + lesson::fixed(static_cast<double>(last) / static_cast<double>(first), 1) +
      " times rank 0's " + std::to_string(first) +
      ". Lesson 5 derives the chapter's balance table from the "
      "pairs the same way.");

  lesson::banner(4, "why the slowest rank sets the pace");
  lesson::say(
      "A rank cannot start a step before the K/V block it needs has come from rank r-1, and no rank can "
      "finish before it has done all its own work, so the ring lasts at least as long as its busiest rank's "
      "work. Here that rank's block is as large as any at every step, so nothing else holds it back: the ring "
      "lasts exactly its work, and every other rank waits for the difference. From the work each rank "
      "counted per step, in visible pairs:");
  std::vector<std::int64_t> most(static_cast<std::size_t>(C), 0);
  for (int i = 0; i < C; ++i)
    for (const RankReport& rk : r.ranks)
      for (const auto& sw : rk.stats.step_work())
        if (sw.phase == "forward" && sw.step == i) most[i] = std::max(most[i], sw.work.pairs);
  const std::int64_t critical = std::accumulate(most.begin(), most.end(), std::int64_t{0});
  std::cout << "  the ring lasts " << critical << " pairs (per step the busiest rank's block, summed)\n"
            << "  rank  works  wait\n";
  std::int64_t total = 0;
  int never_waits = 0;
  for (const RankReport& rk : r.ranks) {
    const std::int64_t work = rk.stats.total_work().pairs;
    total += work;
    never_waits += work == critical;
    std::cout << "  " << lesson::left(std::to_string(rk.rank), 6) << lesson::left(std::to_string(work), 7)
              << critical - work << "\n";
  }
  std::cout << "  works: its visible pairs; wait: the pairs' worth of time it waits before\n"
               "  the ring ends (for a block still on its way, or after its own last block)\n";
  const double busy = static_cast<double>(total) / static_cast<double>(C * critical);
  std::cout << "\n";
  lesson::expect(critical == pairs.back(), "the last rank's work is the critical path");
  lesson::expect(never_waits == 1, "only the last rank never waits");
  lesson::say("The ring lasts as long as rank " + std::to_string(C - 1) + "'s " + std::to_string(critical) +
              " pairs, as busy as any rank at every step; it is the only rank that never waits. The ranks do " +
              std::to_string(total) + " pairs in all, so they are busy " +
              std::to_string(static_cast<int>(busy * 100 + 0.5)) +
              "% of that time. (Wait measured on this machine would mix this with how the operating system "
              "schedules the threads, so the lesson counts work instead.)");
  lesson::say("Lesson 5 cuts the sequence differently so that every rank does the same work at every step.");
  std::cout << "Ring, contiguous, " << C << " ranks, against the single-process reference:\n";
  return lesson::verdicts(r) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return lesson::guarded("lesson 03_ring", [&] { return run_lesson(argc, argv); });
}
