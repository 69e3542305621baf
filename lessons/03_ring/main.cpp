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
    std::string line = "  " + lesson::pad(std::to_string(f.step), 4);
    for (const RankStep& rs : f.ranks) {
      const int owner = L.owner(rs.kv_read.front().lo);
      lesson::expect(owner == ((rs.rank - f.step) % C + C) % C, "at step i rank r holds the K/V of rank r - i");
      for (const BlockDone& b : rs.blocks)
        lesson::expect((b.kind == BlockKind::skipped) == (owner > rs.rank), "a rank skips exactly the later K/V");
      line += "  " + lesson::pad(std::to_string(owner), 6);
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

  lesson::banner(3, "the work per rank, counted three ways");
  std::vector<std::int64_t> blocks, pairs;
  for (const RankReport& rk : r.ranks) {
    blocks.push_back(rk.stats.total_work().calls);
    pairs.push_back(rk.stats.total_work().pairs);
  }
  const auto table = ring_blocks(L);
  lesson::expect(std::equal(blocks.begin(), blocks.end(), table.begin()), "recorded blocks equal the work table");
  const bool chunks = p.seq % (2 * C) == 0;  // the t x t chunk grid exists
  const std::vector<double> tt = chunks ? chunk_blocks(L) : std::vector<double>{};
  std::cout << "  rank  ring blocks computed  t x t blocks  visible pairs\n";
  for (int rank = 0; rank < C; ++rank) {
    std::ostringstream t_blocks;
    if (chunks) t_blocks << tt[static_cast<std::size_t>(rank)];
    std::cout << "  " << lesson::pad(std::to_string(rank), 6)
              << lesson::pad(std::to_string(blocks[static_cast<std::size_t>(rank)]), 22)
              << lesson::pad(chunks ? t_blocks.str() : "-", 14) << pairs[static_cast<std::size_t>(rank)] << "\n";
  }
  std::cout << "  ring blocks computed: attention calls, a rank's queries x one rank's K/V\n"
            << "  t x t blocks: a chunk x a chunk (t = S/2C), a diagonal one counting 1/2\n"
            << "  visible pairs: query-key pairs the mask lets through, x heads x batch\n\n";
  lesson::say(
      "Three units for the same work. A ring block is one rank's queries against one rank's keys, whole or "
      "on the diagonal, and counts 1 either way; a t x t block is a chunk against a chunk, the unit of lesson "
      "5's balance table; visible pairs count exactly what the mask lets through, which is what the time "
      "follows. cpsim counts visible pairs everywhere and names the other two where they appear.");

  lesson::banner(4, "why the slowest rank sets the pace");
  lesson::say(
      "A rank cannot start a step before the K/V block it needs has come from rank r-1, and no rank can "
      "finish before it has done all its own work, so the ring lasts at least as long as its busiest rank's "
      "work. Here that rank's block is as large as any at every step, so nothing else holds it back: the ring "
      "lasts exactly its work, and every other rank is idle for the difference. From the work each rank "
      "counted per step, in visible pairs:");
  std::vector<std::int64_t> most(static_cast<std::size_t>(C), 0);
  for (int i = 0; i < C; ++i)
    for (const RankReport& rk : r.ranks)
      for (const auto& sw : rk.stats.step_work())
        if (sw.phase == "forward" && sw.step == i) most[i] = std::max(most[i], sw.work.pairs);
  const std::int64_t critical = std::accumulate(most.begin(), most.end(), std::int64_t{0});
  std::cout << "  the ring lasts " << critical << " pairs (per step the busiest rank's block, summed)\n"
            << "  rank  works  waits\n";
  std::int64_t total = 0;
  int never_waits = 0;
  for (const RankReport& rk : r.ranks) {
    const std::int64_t work = rk.stats.total_work().pairs;
    total += work;
    never_waits += work == critical;
    std::cout << "  " << lesson::pad(std::to_string(rk.rank), 6) << lesson::pad(std::to_string(work), 7)
              << critical - work << "\n";
  }
  std::cout << "  works: its visible pairs; waits: the pairs' worth of time it is idle before\n"
               "  the ring ends (for a block still on its way, or after its own last block)\n";
  const double busy = static_cast<double>(total) / static_cast<double>(C * critical);
  std::cout << "\n";
  lesson::expect(critical == pairs.back(), "the last rank's work is the critical path");
  lesson::expect(never_waits == 1, "only the last rank never waits");
  lesson::say("The ring lasts as long as rank " + std::to_string(C - 1) + "'s " + std::to_string(critical) +
              " pairs, as busy as any rank at every step; it is the only rank that never waits. The ranks do " +
              std::to_string(total) + " pairs in all, so they are busy " +
              std::to_string(static_cast<int>(busy * 100 + 0.5)) +
              "% of that time. (Waits measured on this machine would mix this with how the operating system "
              "schedules the threads, so the lesson counts work instead.)");
  lesson::say("Lesson 5 cuts the sequence differently so that every rank does the same work at every step.");
  std::cout << "Ring, contiguous, " << C << " ranks, against the single-process reference:\n";
  return lesson::verdicts(r) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return lesson::guarded("lesson 03_ring", [&] { return run_lesson(argc, argv); });
}
