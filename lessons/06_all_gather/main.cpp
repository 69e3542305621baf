// Lesson 6: K/V all-gather, the simplest strategy, and what it costs in memory.
//
// The all-gather concatenates every rank's rows in rank order; with zigzag sharding they must be put back into
// sequence order before attention. The lesson prints that permutation (SeqLayout::rank_to_seq), the prefix each
// local query chunk attends to (from the trace), and the peak bytes each rank held (from the Recorder) beside
// the ring's, for several C.
#include <iostream>

#include "lessons/common/lesson.hpp"
#include "sim/runtime/stepper.hpp"

using namespace cpsim;

namespace {

std::int64_t max_peak(const RunResult& r) {
  std::int64_t m = 0;
  for (const RankReport& rk : r.ranks) m = std::max(m, rk.stats.peak_bytes());
  return m;
}

RunResult quiet_run(RunConfig c, StrategyKind k, int C) {
  c.strategy = k;
  c.problem.ranks = C;
  c.check = true;
  c.tracing = false;
  return run(c);
}

int run_lesson(int argc, char** argv) {
  lesson::Options o;
  o.mask_refusal =
      "lesson 6 takes --window but no --docs or --pad-docs: its pictures name the 2C chunks of one sequence; "
      "`cpsim run --strategy all_gather --docs ... --check` runs it on documents, and lesson 12 "
      "(lessons/12_documents) teaches masks";
  Problem& p = o.config.problem;
  p.ranks = 4;
  p.seq = 32;
  p.heads = p.kv_heads = 2;
  p.head_dim = 8;
  if (!lesson::parse_options(argc, argv, "Lesson 6: K/V all-gather",
                             lesson::kShape | lesson::kSharding | lesson::kWindow | lesson::kStep, o))
    return 0;
  o.config.strategy = StrategyKind::all_gather;
  o.config.backward = true;
  o.config.tracing = true;
  validate(p, StrategyKind::all_gather);
  require(p.seq % (2 * p.ranks) == 0, "this lesson names chunks, so S must be divisible by 2C",
          "use --seq " + std::to_string(4 * p.ranks));
  const SeqLayout L(p.ranks, p.seq, p.sharding);
  const int C = p.ranks;
  const std::int64_t t = L.chunk_len();

  lesson::title("Lesson 6: K/V all-gather");
  lesson::shape(o.config.problem, "forward and backward");
  lesson::say(
      "Each rank keeps its queries and gathers the keys and values of every rank, then computes "
      "ordinary attention for its own queries against the whole sequence. Simple, but every rank "
      "holds the full-length K and V.");

  lesson::banner(1, "rank order is not sequence order");
  const auto r2s = L.rank_to_seq();
  std::string gathered, restore;
  for (std::int64_t row = 0; row < p.seq; row += t) gathered += " " + std::to_string(r2s[row] / t);
  const auto s2r = L.seq_to_rank();
  for (std::int64_t c = 0; c < 2 * C; ++c) restore += " " + std::to_string(s2r[c * t] / t);
  std::cout << "  the all-gather concatenates rank 0's rows, then rank 1's, ...\n"
            << "  chunks in the gathered buffer:       " << gathered << "\n"
            << "  to read chunk 0, 1, 2, ... take slot:" << restore << "\n\n";
  lesson::say(p.sharding == Sharding::zigzag
                  ? "With zigzag sharding rank r contributes chunks r and 2C-1-r, so the gathered buffer is "
                    "shuffled; the strategy copies each rank's rows to their positions before attention."
                  : "With contiguous sharding the gathered buffer is already in sequence order.");

  lesson::banner(2, p.window == 0 ? "each local query chunk attends to its prefix"
                                  : "each local query chunk attends to the keys its window leaves");
  const RunResult r = lesson::run_and_step(o.config, o);
  for (const StepFrame& f : step_frames(r))
    if (f.phase == "forward" && f.step == 1 && !o.last_run_replayed) std::cout << format_frame(f, r) << "\n";
  if (p.window == 0)
    lesson::say(
        "A query chunk c needs keys 0 .. c only, so it is computed against the prefix that ends with it: "
        "the mask's diagonal lands on the prefix's last chunk, the result is final, and no merge is needed.");
  else
    lesson::say("Under the window of W = " + std::to_string(p.window) +
                " keys a query chunk c needs only the keys fewer than W positions before each of its queries, "
                "a range of the chunks up to c, so it is computed against that range alone: the mask's "
                "diagonal lands on the range's last chunk, the result is final, and no merge is needed.");

  lesson::banner(3, "the memory cost, as each rank counted it");
  const std::int64_t full_kv = 2 * p.batch * p.seq * p.kv_heads * p.head_dim * 8;
  std::cout << "  K and V of the whole sequence: " << lesson::bytes(full_kv) << " (f64)\n";
  std::cout << "  rank  peak held (forward + backward)\n";
  for (const RankReport& rk : r.ranks) {
    lesson::expect(rk.stats.peak_bytes() >= full_kv, "an all-gather rank holds at least the full K and V");
    std::cout << "  " << lesson::left(std::to_string(rk.rank), 6) << lesson::bytes(rk.stats.peak_bytes()) << "\n";
  }
  std::cout << "\n";
  lesson::say(
      "In backward a rank holds K and V gathered again (full length), full-length partial dK and dV before the "
      "reduce-scatter, and a copy in rank order while reordering. The ring holds blocks of S/C rows only: two "
      "K/V buffers, and in backward three dK/dV buffers of the same size (the accumulator it holds, the next one "
      "arriving, and its block's own). As C grows (same S), the peak per rank, and that peak as a multiple of the "
      "full K and V:");
  std::cout << "  C   all_gather peak/rank       ring peak/rank\n";
  std::int64_t first_ag = 0, last_ag = 0, last_ring = 0;
  const auto times = [&](std::int64_t b) { return lesson::fixed(static_cast<double>(b) / full_kv, 1) + " x"; };
  for (int c = 1; c <= 8 && p.seq % (2 * c) == 0; c *= 2) {
    const RunResult ag = quiet_run(o.config, StrategyKind::all_gather, c),
                    ring = quiet_run(o.config, StrategyKind::ring, c);
    lesson::expect(ag.check.passed && ring.check.passed, "both runs are correct");
    lesson::expect(max_peak(ag) >= 2 * full_kv, "the all-gather's peak stays above 2x the full K and V");
    if (c > 1) {
      const double shrink = static_cast<double>(max_peak(ring)) / static_cast<double>(last_ring);
      lesson::expect(c == 2 || (shrink > 0.4 && shrink < 0.6), "the ring's peak halves as C doubles");
      lesson::expect(max_peak(ag) < last_ag, "the all-gather's peak falls too, towards its floor");
    }
    if (c == 1) first_ag = max_peak(ag);
    last_ag = max_peak(ag);
    last_ring = max_peak(ring);
    std::cout << "  " << lesson::left(std::to_string(c), 4)
              << lesson::left(lesson::bytes(max_peak(ag)) + " (" + times(max_peak(ag)) + ")", 27)
              << lesson::bytes(max_peak(ring)) << " (" << times(max_peak(ring)) << ")\n";
  }
  std::cout << "\n";
  lesson::say("Both peaks fall as C grows, but not alike. The all-gather's falls from " + lesson::bytes(first_ag) +
              " to " + lesson::bytes(last_ag) + " and never below 2 x the full K and V (" + lesson::bytes(2 * full_kv) +
              "): its full-length K, V, dK and dV do not shrink with C, only the per-rank rest does. The ring's halves "
              "each time C doubles (from C=2 on), towards zero: that is the all-gather's price for its simplicity.");
  std::cout << "All-gather, forward and backward, " << C << " ranks, against the reference:\n";
  return lesson::verdicts(r) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return lesson::guarded("lesson 06_all_gather", [&] { return run_lesson(argc, argv); });
}
