// Lesson 3: ring attention over contiguous chunks.
//
// Q stays on its rank while K/V travel around the ring. The lesson runs the library's ring strategy on
// contiguous sharding with tracing on, replays every step (who holds whose K/V, which block it computes),
// reads the blocks each rank computed from its Recorder ([1, 2, 3, 4] at C=4) and shows why the busiest
// rank sets the pace of every step.
#include <algorithm>
#include <iostream>
#include <numeric>

#include "lessons/common/lesson.hpp"
#include "sim/layout/work_table.hpp"
#include "sim/runtime/stepper.hpp"

using namespace cpsim;

namespace {

int run_lesson(int argc, char** argv) {
  lesson::Options o;
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

  lesson::banner(3, "blocks computed per rank, from the Recorder");
  std::vector<std::int64_t> blocks, pairs;
  for (const RankReport& rk : r.ranks) {
    blocks.push_back(rk.stats.total_work().calls);
    pairs.push_back(rk.stats.total_work().pairs);
  }
  const auto table = ring_blocks(L);
  lesson::expect(std::equal(blocks.begin(), blocks.end(), table.begin()), "recorded blocks equal the work table");
  std::cout << "  blocks computed per rank:  " << lesson::list(blocks) << "  (the work table agrees)\n";
  std::cout << "  visible pairs per rank:    " << lesson::list(pairs) << "  (x heads x batch)\n\n";

  lesson::banner(4, "why the slowest rank sets the pace");
  lesson::say(
      "A ring step ends with an exchange: rank r cannot start step i+1 before rank r-1 has sent the "
      "block it needs, and so on around the ring. Every step therefore lasts as long as its busiest "
      "rank's block. Summing, per step, the largest work of any rank:");
  std::int64_t critical = 0;
  for (int i = 0; i < C; ++i) {
    std::int64_t most = 0;
    for (const RankReport& rk : r.ranks)
      for (const auto& sw : rk.stats.step_work())
        if (sw.phase == "forward" && sw.step == i) most = std::max(most, sw.work.pairs);
    critical += most;
  }
  const std::int64_t total = std::accumulate(pairs.begin(), pairs.end(), std::int64_t{0});
  const double busy = static_cast<double>(total) / static_cast<double>(C * critical);
  std::cout << "  the ring takes as long as " << critical << " pairs of work (rank " << C - 1 << "'s total);\n"
            << "  the ranks do " << total << " pairs in all, so they are busy " << static_cast<int>(busy * 100 + 0.5)
            << "% of that time.\n\n";
  lesson::expect(critical == pairs.back(), "the last rank's work is the critical path");
  std::cout << "Measured on this machine (time each rank waited in the ring's exchanges):\n";
  for (const RankReport& rk : r.ranks)
    std::cout << "  rank " << rk.rank << " waited " << lesson::ms(rk.stats.idle_us() / 1000.0) << "\n";
  std::cout << "\n";
  lesson::say("Lesson 5 cuts the sequence differently so that every rank does the same work at every step.");
  std::cout << "Ring, contiguous, " << C << " ranks, against the single-process reference:\n";
  return lesson::verdicts(r) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return lesson::guarded("lesson 03_ring", [&] { return run_lesson(argc, argv); });
}
