// Lesson 9: grouped-query attention and the Ulysses degree.
//
// 32 query heads share 8 KV heads. Ulysses at C=8 works; at C=16 cpsim refuses it and names the two ways out:
// replicate each KV head onto 2 ranks (--kv-replicate), or run 8-way all-to-all inside a 2-way ring (hybrid).
// The lesson runs both at C=16 and reads the bytes each rank sent from its Recorder, split by call.
#include <iostream>
#include <map>

#include "lessons/common/lesson.hpp"
#include "sim/core/error.hpp"

using namespace cpsim;

namespace {

struct Bytes {
  std::int64_t a2a = 0, p2p = 0;
};

// Bytes rank 0 sent during the forward, split into all-to-all and point-to-point, from its trace.
Bytes sent_by_kind(const RunResult& r) {
  Bytes b;
  for (const TraceEvent& e : r.ranks.front().stats.events())
    if (e.type == TraceEvent::Type::comm && e.phase == "forward")
      (e.name == "all_to_all" ? b.a2a : b.p2p) += e.bytes_sent;
  return b;
}

RunResult run_variant(const lesson::Options& o, StrategyKind k, int C, bool replicate, int a2a) {
  RunConfig c = o.config;
  c.strategy = k;
  c.problem.ranks = C;
  c.problem.kv_replicate = replicate;
  c.problem.a2a = a2a;
  c.tracing = true;
  return lesson::run_and_step(c, o);
}

int run_lesson(int argc, char** argv) {
  lesson::Options o;
  Problem& p = o.config.problem;
  p.ranks = 16;
  p.seq = 32;
  p.heads = 32;
  p.kv_heads = 8;
  p.head_dim = 4;
  if (!lesson::parse_options(
          argc, argv, "Lesson 9: GQA and the Ulysses degree",
          lesson::kSeq | lesson::kHeadDim | lesson::kBatch | lesson::kBackend | lesson::kMask | lesson::kStep, o))
    return 0;
  p.sharding = Sharding::zigzag;
  require(p.seq % 32 == 0, "this lesson runs 16 zigzag ranks, so S must be divisible by 32", "use --seq 32");
  const std::int64_t group = p.heads / p.kv_heads;

  lesson::title("Lesson 9: grouped-query attention and the Ulysses degree");
  lesson::shape(o.config.problem, "C = 8, then 16");
  lesson::say("With grouped-query attention (GQA) several query heads share one key/value head: here Nq = " +
              std::to_string(p.heads) + " query heads read Nkv = " + std::to_string(p.kv_heads) + " KV heads, " +
              std::to_string(group) +
              " query heads per KV head. After the Ulysses all-to-all a rank computes "
              "whole heads, so it needs whole KV heads.");

  lesson::banner(1, "8-way Ulysses works");
  const RunResult u8 = run_variant(o, StrategyKind::ulysses, 8, false, 0);
  std::cout << "  C=8: each rank gets " << p.heads / 8 << " query heads and " << p.kv_heads / 8
            << " KV head (the one they share).\n\n";

  lesson::banner(2, "16-way Ulysses does not");
  try {
    Problem bad = p;
    bad.ranks = 16;
    validate(bad, StrategyKind::ulysses);
    lesson::expect(false, "ulysses refuses 16 ranks for 8 KV heads");
  } catch (const UsageError& e) {
    std::cout << "  C=16: UsageError\n" << lesson::wrap(e.what(), 78, "    ") << "\n";  // what(): as cpsim run words it
  }
  lesson::say(
      "Sixteen ranks would each get 2 query heads and half a KV head; a query head needs every dimension "
      "of its KV head at every position, so the degree of plain Ulysses is at most Nkv = " +
      std::to_string(p.kv_heads) + ". Two ways to use 16 ranks:");

  lesson::banner(3, "way 1: replicate each KV head onto 2 ranks (--kv-replicate)");
  const RunResult rep = run_variant(o, StrategyKind::ulysses, 16, true, 0);
  lesson::say(
      "Before the all-to-all each rank copies its K and V so that there are 16 KV heads (each real one "
      "twice); the all-to-all then hands every rank the KV head its query heads read. Backward sums the "
      "two copies' gradients.");

  lesson::banner(4, "way 2: 8-way all-to-all inside a 2-way ring (hybrid, --a2a 8)");
  const RunResult hyb = run_variant(o, StrategyKind::hybrid, 16, false, 8);
  lesson::say(
      "Ranks 0-7 and 8-15 form two all-to-all groups of 8 (no replication needed: 8 divides 8); "
      "then rings of 2 ranks (0 with 8, 1 with 9, ...) pass K/V once.");

  lesson::banner(5, "what each way sends, as rank 0 counted it (forward)");
  const std::int64_t s16 = p.seq / 16, word = 8;
  const std::int64_t q16 = p.batch * s16 * p.heads * p.head_dim * word,
                     kv16 = p.batch * s16 * p.kv_heads * p.head_dim * word;
  std::cout << "  at C=16 a rank's q is " << lesson::bytes(q16) << ", its k and v " << lesson::bytes(kv16)
            << " each\n\n";
  std::cout << "  way                      C   all-to-all  ring (P2P)  total sent\n";
  const auto row = [&](const std::string& name, int C, const RunResult& r) {
    const Bytes b = sent_by_kind(r);
    std::cout << "  " << lesson::left(name, 25) << lesson::left(std::to_string(C), 4)
              << lesson::left(lesson::bytes(b.a2a), 12) << lesson::left(lesson::bytes(b.p2p), 12)
              << lesson::bytes(b.a2a + b.p2p) << "\n";
    return b;
  };
  row("ulysses", 8, u8);
  const Bytes br = row("ulysses --kv-replicate", 16, rep);
  const Bytes bh = row("hybrid 8 x 2", 16, hyb);
  std::cout << "\n";
  // Replication: q and out move (15/16) of Nq heads, k and v (15/16) of 2 x Nkv heads (each KV head twice).
  lesson::expect(br.a2a == (2 * q16 + 2 * 2 * kv16) * 15 / 16 && br.p2p == 0, "replicated K/V double their A2A bytes");
  // Hybrid: A2A of 8 on [B, s, N, D]: 7/8 of q, k, v, out; then one ring step sends K and V of S/2 positions.
  const std::int64_t kv_ring = 2 * p.batch * (p.seq / 2) * (p.kv_heads / 8) * p.head_dim * word;
  lesson::expect(bh.a2a == (2 * q16 + 2 * kv16) * 7 / 8 && bh.p2p == kv_ring,
                 "hybrid bytes: A2A of 8 plus one ring step");
  lesson::say(
      "Replication pays for its KV copies inside the all-to-all: K and V travel as 16 heads instead of 8. "
      "The hybrid sends no copies; its all-to-all is among 8 ranks, and the ring adds one K/V block of S/2 "
      "positions for the rank's own KV head. Which is cheaper in time depends on the links: the "
      "all-to-all wants a fast domain, the ring step can overlap with compute (lesson 10).");

  std::cout << "The three runs against the single-process reference:\n";
  bool ok = lesson::verdicts(u8, "ulysses 8");
  ok = lesson::verdicts(rep, "replicate") && ok;
  ok = lesson::verdicts(hyb, "hybrid 8x2") && ok;
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return lesson::guarded("lesson 09_gqa", [&] { return run_lesson(argc, argv); });
}
