// Lesson 5: zigzag sharding balances the causal ring.
//
// The balance table comes from sim/layout/work_table.hpp (computed from positions); the per-step sub-blocks
// (diagonal / half-kv / half-q) and their work come from the Recorder of a traced zigzag ring run.
#include <iostream>
#include <map>

#include "lessons/common/lesson.hpp"
#include "sim/layout/grid.hpp"
#include "sim/layout/work_table.hpp"
#include "sim/runtime/stepper.hpp"

using namespace cpsim;

namespace {

std::string chunk_list(const SeqLayout& L) {
  std::string s;
  for (int r = 0; r < L.ranks(); ++r) {
    const auto c = L.chunks(r);
    s += (s.empty() ? "[" : " [") + std::to_string(c[0]) + "," + std::to_string(c[1]) + "]";
  }
  return s;
}

int run_lesson(int argc, char** argv) {
  lesson::Options o;
  Problem& p = o.config.problem;
  p.ranks = 4;
  p.seq = 16;
  p.heads = p.kv_heads = 2;
  p.head_dim = 8;
  if (!lesson::parse_options(argc, argv, "Lesson 5: zigzag sharding", lesson::kShape | lesson::kStep, o)) return 0;
  o.config.strategy = StrategyKind::ring;
  o.config.tracing = true;
  p.sharding = Sharding::zigzag;
  validate(p, StrategyKind::ring);
  const int C = p.ranks;
  const SeqLayout Z(C, p.seq, Sharding::zigzag), K(C, p.seq, Sharding::contiguous);
  const std::int64_t t = Z.chunk_len(), BN = p.batch * p.heads;

  lesson::title("Lesson 5: zigzag sharding, the same work for every rank at every step");
  lesson::shape(o.config.problem, "2C = " + std::to_string(2 * C) + " chunks of t = " + std::to_string(t) + " tokens");
  lesson::say(
      "Cut the sequence into 2C chunks of t tokens. Under the causal mask a query chunk c sees c whole key "
      "chunks and about half of its own (the diagonal block): c + 1/2 t x t blocks of work. Contiguous "
      "sharding gives rank r chunks 2r and 2r+1; zigzag gives it chunk r and chunk 2C-1-r, one early and one "
      "late.");

  lesson::banner(1, "the balance, computed from the positions");
  const auto kb = chunk_blocks(K), zb = chunk_blocks(Z);
  const auto kp = visible_pairs_per_rank(K), zp = visible_pairs_per_rank(Z);
  const auto kr = ring_blocks(K);
  std::cout << "  work per rank in visible pairs per (batch, head), and the handbook chapter's\n"
            << "  balance (t x t blocks, a diagonal one counting 1/2), derived from them below:\n"
            << "  contiguous: chunks per rank  " << chunk_list(K) << "\n"
            << "              pairs per rank   " << lesson::list(kp) << ", max/mean " << lesson::fixed(imbalance(kp), 2)
            << "\n"
            << "              chapter's blocks " << lesson::list(kb) << ", max/mean " << lesson::fixed(imbalance(kb), 2)
            << "\n"
            << "  zigzag:     chunks per rank  " << chunk_list(Z) << "\n"
            << "              pairs per rank   " << lesson::list(zp) << ", max/mean " << lesson::fixed(imbalance(zp), 2)
            << "\n"
            << "              chapter's blocks " << lesson::list(zb) << ", max/mean " << lesson::fixed(imbalance(zb), 2)
            << "\n\n";
  for (double b : zb) lesson::expect(b == 2 * C, "every zigzag rank's two chunks cost 2C blocks");
  // A chunk c holds c t^2 + t(t+1)/2 visible pairs; the chapter's c + 1/2 blocks are (pairs - t/2) / t^2.
  for (std::size_t r = 0; r < kb.size(); ++r)
    lesson::expect(kb[r] * double(t * t) == double(kp[r] - t) && zb[r] * double(t * t) == double(zp[r] - t),
                   "the chapter's blocks are (pairs - t) / t^2 for two chunks");
  lesson::say(
      "A chunk c holds c t^2 + t(t+1)/2 visible pairs per (batch, head): c whole t x t blocks before it and "
      "the diagonal block's t(t+1)/2. The chapter counts c + 1/2 blocks for it, so its count for a rank's two "
      "chunks is (pairs - t) / t^2: rank 0's (" +
      std::to_string(kp[0]) + " - " + std::to_string(t) + ") / " + std::to_string(t * t) + " = " +
      lesson::fixed(kb[0], 0) + "." +
      (C > 1 ? " Its diagonal holds a little more than half a block of pairs, so the chapter's contiguous "
               "max/mean, " +
                   lesson::fixed(imbalance(kb), 2) + ", is a little above the pairs' " +
                   lesson::fixed(imbalance(kp), 2) + "."
             : std::string()));
  if (C > 1) lesson::expect(imbalance(kb) > imbalance(kp), "the chapter's blocks overstate the contiguous imbalance");
  // Contiguous rank r computes r whole ring blocks (4 t x t blocks each) and one diagonal one (1 + 2 x 1/2 = 2).
  for (std::size_t r = 0; r < kb.size(); ++r)
    lesson::expect(kb[r] == 4.0 * static_cast<double>(kr[r]) - 2, "t x t blocks = 4 per ring block, 2 on the diagonal");
  lesson::say(
      "Lesson 3 counted the same contiguous case in the chapter's ring blocks, a rank's queries against one "
      "rank's keys: " +
      lesson::list(std::vector<std::int64_t>(kr.begin(), kr.end())) +
      ". They are not proportional to these: a ring block is 2t x 2t, four t x t blocks when wholly visible, "
      "but the diagonal one counts 2 (one whole, two halves, one masked), so rank r's r + 1 ring blocks are "
      "4r + 2 t x t blocks, not 4(r + 1).");
  lesson::say(
      "Under zigzag rank r's two chunks cost r + 1/2 and (2C-1-r) + 1/2 of the chapter's blocks: always 2C together. "
      "The causal grid "
      "(rows: query chunks, columns: key chunks):");
  std::cout << lesson::indent(draw_grid(owner_grid(Z)), "  ") << grid_legend("owns the query chunk", false) << "\n";

  lesson::banner(2, "the zigzag ring, step by step");
  lesson::say(
      "At step i rank r holds the K/V of owner o = r - i (mod C), both of o's chunks. Its local query "
      "halves are h0 = chunk r and h1 = chunk 2C-1-r. The rule for what to compute (Transformer Engine's):\n"
      "  step 0 (o = r): diagonal, Q[h0,h1] x KV[h0,h1], causal mask\n"
      "  o < r: half-kv, Q[h0,h1] x KV[h0 of o] (o's early chunk is before both)\n"
      "  o > r: half-q, Q[h1] x KV[h0,h1 of o] (o's chunks are after h0, before h1)");
  lesson::say(
      "Every block computed lies below the causal diagonal; the names say which half of the pair a step uses: "
      "half-kv half of the K/V it holds (the owner's early chunk), half-q half of its queries (its late "
      "chunk). Either way a step after 0 computes two t x t blocks, wholly visible, and no masked pair.");
  const RunResult r = lesson::run_and_step(o.config, o);
  const auto frames = step_frames(r);
  if (!o.last_run_replayed)
    for (const StepFrame& f : frames)
      if (f.phase == "forward") std::cout << format_frame(f, r) << "\n";

  lesson::banner(3, "the work per step, as each rank counted it");
  const auto table = ring_step_pairs(Z);
  std::cout << "  visible pairs x heads x batch per step (t = " << t << " tokens, heads x batch = " << BN << ")\n";
  std::cout << "  rank  ";
  for (int i = 0; i < C; ++i) std::cout << lesson::left("step " + std::to_string(i), 9);
  std::cout << "kinds\n";
  for (const RankReport& rk : r.ranks) {
    std::cout << "  " << lesson::left(std::to_string(rk.rank), 6);
    for (int i = 0; i < C; ++i) {
      std::int64_t pairs = 0;
      for (const auto& sw : rk.stats.step_work())
        if (sw.phase == "forward" && sw.step == i) pairs += sw.work.pairs;
      const std::int64_t want = BN * (i == 0 ? 2 * t * t + t : 2 * t * t);
      lesson::expect(pairs == want && pairs == BN * table[rk.rank][i], "step work is 2t^2 + t, then 2t^2");
      std::cout << lesson::left(std::to_string(pairs), 9);
    }
    std::map<std::string, int> kinds;
    for (const StepFrame& f : frames)
      if (f.phase == "forward")
        for (const BlockDone& b : f.ranks[static_cast<std::size_t>(rk.rank)].blocks) kinds[block_kind_name(b.kind)]++;
    lesson::expect(kinds["half-kv"] == rk.rank && kinds["half-q"] == C - 1 - rk.rank, "r half-kv steps, C-1-r half-q");
    std::string ks;
    for (const auto& [k, n] : kinds) ks += (ks.empty() ? "" : " ") + k + " " + std::to_string(n);
    std::cout << ks << "\n";
  }
  std::int64_t total = 0;
  for (const RankReport& rk : r.ranks) total += rk.stats.total_work().pairs;
  lesson::expect(total == BN * p.seq * (p.seq + 1) / 2, "the ranks together cover S(S+1)/2 pairs per head");
  std::cout << "\n";
  lesson::say(
      "Step 0 costs 2t^2 + t pairs per head (one full block and two triangles with their diagonals), "
      "every later step 2t^2 (two full t x t blocks), on every rank: nobody waits for anybody. Over the "
      "C steps the ranks together cover the causal S(S+1)/2 = " +
      std::to_string(p.seq * (p.seq + 1) / 2) + " pairs per head.");
  std::cout << "Zigzag ring, " << C << " ranks, against the single-process reference:\n";
  return lesson::verdicts(r) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return lesson::guarded("lesson 05_zigzag", [&] { return run_lesson(argc, argv); });
}
