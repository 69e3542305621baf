// Lesson 12: documents and windows. The imbalance each mask makes under contiguous, zigzag, striped and balanced
// sharding, per rank and per ring step (sim/layout/work_table.hpp, by formula on the positions' runs), and the
// check of ring runs under those masks against the single-process reference with the same mask.
#include <algorithm>
#include <cmath>
#include <iostream>

#include "lessons/common/lesson.hpp"
#include "sim/layout/work_table.hpp"
#include "sim/strategies/kv_traffic.hpp"

using namespace cpsim;

namespace {

const ShardingWork& find(const std::vector<ShardingWork>& all, Sharding s) {
  for (const ShardingWork& w : all)
    if (w.sharding == s) return w;
  throw Error("lesson 12: no " + std::string(sharding_name(s)) + " in the comparison");
}

// One row per sharding: its per-rank pairs, max/mean, and the ring's imbalance; with `legend`, what they count.
void print_side_by_side(const std::vector<ShardingWork>& all, int C, bool legend) {
  std::string head = "  " + lesson::left("sharding", 31);
  for (int r = 0; r < C; ++r) head += lesson::left("rank " + std::to_string(r), 8);
  lesson::row(head + "max/mean  ring");
  for (const ShardingWork& w : all) {
    if (!w.why_not.empty()) continue;
    std::string line = "  " + lesson::left(w.name, 31);
    for (std::int64_t x : w.per_rank) line += lesson::left(std::to_string(x), 8);
    lesson::row(line + lesson::left(lesson::fixed(w.imbalance, 2), 10) + lesson::fixed(w.ring_imbalance, 2));
  }
  if (legend)
    std::cout << "  rank r: visible pairs per head of rank r's queries (query-key pairs the mask\n"
                 "  lets through); max/mean: the busiest rank over the mean; ring: each ring\n"
                 "  step's busiest rank, summed over the steps, over an even split\n";
  std::cout << "\n";
}

void print_steps(const std::vector<ShardingWork>& all, int C) {
  std::string head = "  " + lesson::left("busiest rank / mean", 31);
  for (int i = 0; i < C; ++i) head += lesson::left("step " + std::to_string(i), 8);
  lesson::row(head);
  for (const ShardingWork& w : all) {
    if (!w.why_not.empty()) continue;
    std::string line = "  " + lesson::left(w.name, 31);
    for (double x : step_imbalances(w.steps)) line += lesson::left(step_imbalance_text(x), 8);
    lesson::row(line);
  }
  std::cout << "\n";
}

std::int64_t total(const ShardingWork& w) {
  std::int64_t n = 0;
  for (std::int64_t x : w.per_rank) n += x;
  return n;
}

// STEP 3's table: the K/V bytes each rank needs in the forward and what the ring, the pruned ring and the mask
// exchange send it (forward runs, checked against the reference). Returns the three runs' received bytes per rank.
struct Bytes {
  std::vector<std::int64_t> need, ring, pruned, exchange;
};
Bytes bytes_table(RunConfig c, const lesson::Options& o, const std::string& label) {
  c.backward = false;
  c.check = true;
  Bytes b;
  for (const KvNeed& n : kv_need(c.problem)) b.need.push_back(n.forward);
  const auto received = [&](StrategyKind k) {
    c.strategy = k;
    const RunResult r = lesson::run_and_step(c, o, false);
    lesson::expect(r.check.passed, label + ": " + std::string(strategy_name(k)) + " matches the reference");
    std::vector<std::int64_t> v;
    for (const RankReport& rk : r.ranks) v.push_back(rk.stats.comm_counts().bytes_received);
    return v;
  };
  b.ring = received(StrategyKind::ring);
  b.pruned = received(StrategyKind::pruned_ring);
  b.exchange = received(StrategyKind::mask_exchange);
  const auto sum = [](const std::vector<std::int64_t>& v) {
    std::int64_t n = 0;
    for (std::int64_t x : v) n += x;
    return n;
  };
  const auto pct = [&](const std::vector<std::int64_t>& v) {
    const double x = redundancy(sum(v), sum(b.need));
    return std::isinf(x) ? std::string("all") : lesson::fixed(100.0 * x, 1) + "%";
  };
  std::cout << "  " << label << ", forward: K/V bytes sent to each rank\n";
  const auto line = [&](const std::string& a, const std::string& n, const std::string& x, const std::string& y,
                        const std::string& z) {
    lesson::row("  " + lesson::left(a, 12) + lesson::left(n, 11) + lesson::left(x, 11) + lesson::left(y, 13) + z);
  };
  line("rank", "need", "ring", "pruned_ring", "mask_exchange");
  for (std::size_t r = 0; r < b.need.size(); ++r)
    line(std::to_string(r), lesson::bytes(b.need[r]), lesson::bytes(b.ring[r]), lesson::bytes(b.pruned[r]),
         lesson::bytes(b.exchange[r]));
  line("all", lesson::bytes(sum(b.need)), lesson::bytes(sum(b.ring)), lesson::bytes(sum(b.pruned)),
       lesson::bytes(sum(b.exchange)));
  line("sent/need-1", "", pct(b.ring), pct(b.pruned), pct(b.exchange));
  std::cout << "\n";
  for (std::size_t r = 0; r < b.need.size(); ++r) {
    lesson::expect(b.exchange[r] == b.need[r], "the mask exchange sends each rank exactly its need");
    lesson::expect(b.need[r] <= b.pruned[r] && b.pruned[r] <= b.ring[r], "need <= pruned ring <= ring");
  }
  return b;
}

int run_lesson(int argc, char** argv) {
  lesson::Options o;
  o.mask_refusal =
      "lesson 12 picks its own masks (8 seeded documents, then a window of S/(2C)) and takes no --docs "
      "or --window; --seq and --ranks change both, and `cpsim layout --docs ... --window ...` compares "
      "the shardings under any mask";
  Problem& p = o.config.problem;
  p.ranks = 4;
  p.seq = 512;
  p.heads = p.kv_heads = 2;
  p.head_dim = 8;
  if (!lesson::parse_options(argc, argv, "Lesson 12: documents and windows", lesson::kShape | lesson::kStep, o))
    return 0;
  const int C = p.ranks;
  const std::int64_t S = p.seq;
  o.config.strategy = StrategyKind::ring;
  p.docs = parse_docs("sample:8");  // 8 lengths drawn from MagiAttention's document-length distribution
  p.docs.seed = o.config.seed;
  validate(p, StrategyKind::ring);     // S % 2C == 0: the seeded lengths are multiples of 2C
  const std::int64_t W = S / (2 * C);  // STEP 2's window: shorter than a rank's S/C tokens

  lesson::title("Lesson 12: documents and windows, and the shardings that balance them");
  Problem unmasked = p;  // the note names the masks; STEP 1 prints the documents
  unmasked.docs = DocSpec{};
  lesson::shape(unmasked, "8 seeded documents, then a window of S/(2C) = " + std::to_string(W) +
                              " keys; every sharding compared");
  lesson::say(
      "Long-context training packs many documents into one sequence and masks attention at their "
      "boundaries: a query sees the earlier keys of its own document only (Llama 3's document mask; "
      "Transformer Engine's THD format). Many models also see only a window of the W latest keys "
      "(Mistral). Zigzag balanced the causal triangle of one sequence (lesson 5). Under these masks it "
      "need not.");

  lesson::banner(1, "packed documents: the work of each rank under each sharding");
  LayoutOptions docs;
  docs.docs = p.documents();
  docs.mask = p.mask();
  const auto with_docs = compare_shardings(C, S, docs);
  std::cout << "  " << docs.docs.describe() << "\n"
            << "  visible pairs per head, " << docs.mask.describe() << "\n\n";
  print_side_by_side(with_docs, C, true);
  std::int64_t want = 0;
  for (std::int64_t L : docs.docs.lengths) want += L * (L + 1) / 2;
  for (const ShardingWork& w : with_docs)
    if (w.why_not.empty()) lesson::expect(total(w) == want, "every sharding computes the sum of L(L+1)/2 pairs");
  const ShardingWork &global = find(with_docs, Sharding::global_zigzag), &per_doc = find(with_docs, Sharding::zigzag);
  lesson::expect(per_doc.imbalance == 1.0, "per-document zigzag is balanced");
  lesson::expect(global.imbalance > per_doc.imbalance, "global zigzag is not");
  for (std::int64_t L : docs.docs.lengths) lesson::expect(L % (2 * C) == 0, "every length is a multiple of 2C");
  lesson::expect(find(with_docs, Sharding::striped).imbalance < global.imbalance, "striped is closer to 1.00");
  const ShardingWork& pieces = find(with_docs, Sharding::doc_contiguous);
  lesson::expect(pieces.imbalance > global.imbalance, "contiguous per document is the least even here");
  lesson::say("Every sharding computes the same " + std::to_string(want) +
              " pairs per head (the sum of L(L+1)/2 over the documents); they differ in who computes them. "
              "Zigzag over the whole sequence gives rank r chunks r and 2C-1-r of the sequence, but a chunk that "
              "starts a document sees few keys: max/mean " +
              lesson::fixed(global.imbalance, 2) +
              ". Zigzag per document cuts every document into 2C chunks and gives rank r chunks r and 2C-1-r of "
              "each (every length here is a multiple of 2C): exactly 1.00. Cutting each document into C pieces "
              "instead (rank r owns piece r of each, as ring-flash-attention's varlen ring does) leaves the last "
              "piece of every document the most keys: max/mean " +
              lesson::fixed(pieces.imbalance, 2) + ". Striped (rank r owns r, r+C, ...) is "
              "close to it; balanced deals chunks of T tokens to the least loaded rank, biggest first, and "
              "minimises the busiest rank's total only. 'ring' is the ring's imbalance: each step lasts as long "
              "as its busiest rank.");
  print_steps(with_docs, C);
  lesson::expect(find(with_docs, Sharding::zigzag).ring_imbalance == 1.0, "per-document zigzag: every step even");
  double worst_step = 0;
  for (double x : step_imbalances(find(with_docs, Sharding::balanced).steps)) worst_step = std::max(worst_step, x);
  const ShardingWork& balanced = find(with_docs, Sharding::balanced);
  lesson::expect(worst_step >= balanced.imbalance || balanced.imbalance == 1.0, "a step is at least as uneven");
  lesson::say("Per step the picture is sharper: balanced is at max/mean " + lesson::fixed(balanced.imbalance, 2) +
              " in total, yet at its worst step the busiest rank does " + lesson::fixed(worst_step, 2) +
              " times the mean while the others wait.");

  lesson::banner(2, "a sliding window");
  LayoutOptions window;
  window.mask = Mask(true, W, {});
  const auto with_window = compare_shardings(C, S, window);
  std::cout << "  visible pairs per head, " << window.mask.describe() << "\n\n";
  print_side_by_side(with_window, C, false);
  print_steps(with_window, C);
  const ShardingWork &striped = find(with_window, Sharding::striped), &zig = find(with_window, Sharding::global_zigzag),
                     &contiguous = find(with_window, Sharding::contiguous);
  lesson::expect(want > 0 && total(zig) == S * W - W * (W - 1) / 2, "a window sees S W - W(W-1)/2 pairs");
  lesson::expect(striped.ring_imbalance < zig.ring_imbalance, "striped balances the window's ring better");
  lesson::expect(contiguous.ring_imbalance <= zig.ring_imbalance, "contiguous is no worse than zigzag here");
  for (const auto& steps : contiguous.steps)
    for (std::size_t i = 2; i < steps.size(); ++i) lesson::expect(steps[i] == 0, "contiguous: steps 2.. skipped");
  lesson::say("A window of W = " + std::to_string(W) +
              " keys (S W - W(W-1)/2 = " + std::to_string(S * W - W * (W - 1) / 2) +
              " pairs) shorter than a rank's S/C tokens leaves a contiguous rank its own block and its left "
              "neighbour's: the ring's later steps are skipped everywhere, and contiguous beats zigzag, whose "
              "late chunk needs a far owner's keys. Striped gives every rank every C-th query, so each step is a "
              "thin diagonal band of the same size on every rank: ring imbalance " +
              lesson::fixed(striped.ring_imbalance, 2) + ".");

  lesson::banner(3, "the bytes: what each rank needs, and what the ring sends it");
  lesson::say(
      "The ring skips the masked work, but every rank still sends its whole K/V block C-1 times. A rank "
      "needs only the rows of other ranks that one of its queries sees: the need. The pruned ring "
      "forwards a block only as far as some rank still needs it (both ways round the ring, whichever "
      "is shorter); the mask exchange sends each rank exactly its need, straight from the owners.");
  RunConfig t = o.config;
  t.problem.docs = DocSpec{};
  const std::int64_t block = 2 * p.batch * (S / C) * p.kv_heads * p.head_dim *
                             static_cast<std::int64_t>(dtype_size(p.dtype));  // one rank's K and V
  const Bytes causal = bytes_table(t, o, "causal, zigzag");
  for (int r = 0; r < C; ++r)
    lesson::expect(2 * causal.need[static_cast<std::size_t>(r)] == (2 * (C - 1) - r) * block,
                   "causal zigzag: rank r needs C-1-r/2 blocks");
  lesson::say("Causal zigzag: rank r needs half of each earlier rank's block (their early chunk) and all of "
              "each later one's, C-1-r/2 blocks of the C-1 the ring sends it; in all 3/4, so a quarter of the "
              "ring's bytes are never used (MagiAttention's blog puts it at about 25%). Nothing can be pruned: "
              "every block is needed all the way round.");
  t.problem.docs = p.docs;
  t.problem.sharding = Sharding::contiguous;
  const Bytes documents = bytes_table(t, o, "documents, contiguous");
  t.problem.docs = DocSpec{};
  t.problem.window = W;
  t.problem.sharding = Sharding::global_zigzag;
  const Bytes windowed = bytes_table(t, o, "window " + std::to_string(W) + ", zigzag");
  for (std::int64_t x : windowed.pruned) lesson::expect(x <= 2 * block, "a window of one chunk: two blocks at most");
  const auto all = [](const std::vector<std::int64_t>& v) {
    std::int64_t n = 0;
    for (std::int64_t x : v) n += x;
    return n;
  };
  lesson::expect(all(documents.pruned) <= all(documents.ring), "documents: the pruned ring sends no more");
  Problem per_doc_zigzag = p;  // the documents under zigzag per document need what the causal mask needs
  std::int64_t per_doc_need = 0;
  for (const KvNeed& n : kv_need(per_doc_zigzag)) per_doc_need += n.forward;
  lesson::expect(per_doc_need == all(causal.need), "zigzag per document needs as much as the causal mask");
  lesson::expect(all(windowed.pruned) <= all(windowed.ring), "window: the pruned ring sends no more");
  lesson::say("Contiguous sharding keeps a document on one or two ranks: a rank needs only the documents "
              "that start on an earlier rank, and the ring sends " +
              lesson::bytes(all(documents.ring)) + " for a need of " + lesson::bytes(all(documents.need)) +
              "; the pruned ring stops each block where the last document it holds ends (" +
              lesson::bytes(all(documents.pruned)) +
              "). Zigzag per document puts a piece of every document on every rank, which balances the work "
              "(STEP 1) but needs as much as the causal mask. A window of one chunk needs only the "
              "neighbours' edge rows: the pruned ring becomes a halo exchange, each block at most one hop each "
              "way, and the mask exchange sends only the W-1 rows before each of a rank's chunks.");

  lesson::banner(4, "the check: ring runs under these masks against the reference");
  lesson::say(
      "The single-process reference takes the same mask, so the check compares like with like, "
      "forward and backward.");
  bool ok = true;
  RunConfig a = o.config;
  a.backward = true;
  a.check = true;
  a.problem.sharding = Sharding::zigzag;  // per document
  // --step pauses at the STEPs only: the stepper's frames name chunks of the whole sequence, and a rank here holds
  // a piece of every document (or every C-th token), too many spans for an 80-column frame.
  ok = lesson::verdicts(lesson::run_and_step(a, o, false), "documents") && ok;
  RunConfig b = a;
  b.problem.docs = DocSpec{};
  b.problem.window = W;
  b.problem.sharding = Sharding::striped;
  ok = lesson::verdicts(lesson::run_and_step(b, o, false), "window") && ok;
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return lesson::guarded("lesson 12_documents", [&] { return run_lesson(argc, argv); });
}
