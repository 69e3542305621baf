// Lesson 2: Ulysses, the all-to-all that transposes which dimension is distributed.
//
// Every element of a tagged tensor records its own (position, head); after the library's all-to-all
// (HeadsExchange::seq_to_heads) each rank reports which (position, head) pairs it holds. The lesson draws
// both maps, prints the shapes of q, k, v and out before and after, runs the ulysses strategy with its four
// recorded all-to-alls, and shows the error a bad degree gets.
#include <iostream>
#include <map>
#include <set>

#include "lessons/common/lesson.hpp"
#include "sim/core/bytes.hpp"
#include "sim/core/error.hpp"
#include "sim/kernels/cpu_device.hpp"
#include "sim/runtime/stepper.hpp"
#include "sim/strategies/heads_exchange.hpp"

using namespace cpsim;

namespace {

constexpr std::int64_t kTag = 1000;  // element value = position * kTag + head

struct Exchanged {
  Dims q_before, q_after, kv_before, kv_after, out_before, out_after;  // [B, S, N, D] of each, as exchanged
  std::vector<std::int64_t> held;  // (position * kTag + head) of every row and head the rank holds afterwards
};

// On every rank: tag its [1, s, N, 1] shard, all-to-all it to head sharding, read back what arrived.
std::vector<Exchanged> exchange_tags(const Problem& p, Backend backend) {
  const SeqLayout L(p.ranks, p.seq, p.sharding);
  LaunchOptions lo;
  lo.ranks = p.ranks;
  lo.backend = backend;
  const auto outcomes = launch(lo, [&](Communicator& comm) {
    CpuDevice dev(comm.recorder());
    const Positions pos = L.positions(comm.rank());
    std::vector<double> tags;
    for (std::int64_t x : pos)
      for (std::int64_t h = 0; h < p.heads; ++h) tags.push_back(static_cast<double>(x * kTag + h));
    const Buffer mine = dev.alloc({1, L.local_len(), p.heads, 1}, DType::f64, Layout::bsnd, "tags");
    dev.upload(mine, tags.data());
    const HeadsExchange a2a(comm, dev, L, rank_range(0, p.ranks));
    const Buffer heads = a2a.seq_to_heads(mine, "tags_heads");  // [1, S, N/C, 1]
    std::vector<double> got(static_cast<std::size_t>(heads.numel()));
    dev.download(heads, got.data());
    // The shapes of the real tensors through the same exchanges: q, k (v is exchanged as k) and, back, out.
    const Buffer q = dev.alloc({p.batch, L.local_len(), p.heads, p.head_dim}, DType::f64, Layout::bsnd, "q");
    const Buffer k = dev.alloc({p.batch, L.local_len(), p.kv_heads, p.head_dim}, DType::f64, Layout::bsnd, "k");
    const Buffer q_heads = a2a.seq_to_heads(q, "q_heads"), k_heads = a2a.seq_to_heads(k, "k_heads");
    const Buffer out_heads = dev.alloc(q_heads.dims(), DType::f64, Layout::bsnd, "out_heads");
    const Buffer out = a2a.heads_to_seq(out_heads, "out");
    ByteWriter w;
    for (const Buffer* b : {&q, &q_heads, &k, &k_heads, &out_heads, &out})
      for (std::int64_t x : {b->dims().b, b->dims().s, b->dims().n, b->dims().d}) w.put(x);
    std::vector<std::int64_t> held(got.begin(), got.end());
    w.put(held);
    return w.take();
  });
  std::vector<Exchanged> out;
  for (const auto& oc : outcomes) {
    ByteReader rd(oc.result);
    Exchanged e;
    for (Dims* d : {&e.q_before, &e.q_after, &e.kv_before, &e.kv_after, &e.out_before, &e.out_after}) {
      d->b = rd.get<std::int64_t>();
      d->s = rd.get<std::int64_t>();
      d->n = rd.get<std::int64_t>();
      d->d = rd.get<std::int64_t>();
    }
    rd.get(e.held);
    out.push_back(e);
  }
  return out;
}

// Rows: chunks of t positions; columns: heads; cell: the rank holding that (chunk, head).
void draw_holders(const SeqLayout& L, std::int64_t heads,
                  const std::map<std::pair<std::int64_t, std::int64_t>, int>& who) {
  const std::int64_t t = L.chunk_len();
  std::string header = "         ";
  for (std::int64_t h = 0; h < heads; ++h) header += lesson::left("h" + std::to_string(h), 4);
  while (header.back() == ' ') header.pop_back();
  std::cout << header << "\n";
  for (std::int64_t c = 0; c < 2 * L.ranks(); ++c) {
    std::string line = "  " + lesson::left("c" + std::to_string(c), 7);
    for (std::int64_t h = 0; h < heads; ++h) {
      std::set<int> ranks;
      for (std::int64_t x = c * t; x < (c + 1) * t; ++x) ranks.insert(who.at({x, h}));
      lesson::expect(ranks.size() == 1, "a whole chunk of one head sits on one rank");
      line += lesson::left(std::to_string(*ranks.begin()), 4);
    }
    while (line.back() == ' ') line.pop_back();
    std::cout << line << "\n";
  }
  std::cout << "  rows: chunks of " << t << " positions (" << sharding_name(L.sharding())
            << " sharding); columns: heads;\n  cell: the rank that holds that chunk of that head\n\n";
}

void show_refusal(Problem p, int C) {
  p.ranks = C;
  p.seq = 2 * C;       // the smallest sequence the layout accepts, so that only the heads can object
  p.docs = DocSpec{};  // nor the documents of --docs (they sum to the lesson's S)
  try {
    validate(p, StrategyKind::ulysses);
    lesson::expect(false, "ulysses refuses C=" + std::to_string(C));
  } catch (const UsageError& e) {
    std::cout << "  C=" << C << ": UsageError\n" << lesson::wrap(e.what(), 78, "    ");  // what(): as cpsim run words it
  }
}

int run_lesson(int argc, char** argv) {
  lesson::Options o;
  Problem& p = o.config.problem;
  p.ranks = 4;
  p.seq = 16;
  p.heads = p.kv_heads = 8;
  p.head_dim = 4;
  p.sharding = Sharding::contiguous;  // zigzag (lesson 5) exchanges the same way, on other rows
  if (!lesson::parse_options(argc, argv, "Lesson 2: Ulysses",
                             lesson::kShape | lesson::kSharding | lesson::kMask | lesson::kStep, o))
    return 0;
  o.config.strategy = StrategyKind::ulysses;
  validate(p, StrategyKind::ulysses);
  require(p.seq % (2 * p.ranks) == 0, "this lesson draws chunks, so S must be divisible by 2C",
          "use --seq " + std::to_string(4 * p.ranks));
  require(!p.docs.any() || p.sharding == Sharding::contiguous,
          "this lesson draws the chunks of S/2C positions each rank holds, and --docs with --sharding " +
              std::string(sharding_name(p.sharding)) + " cuts every document instead",
          "use --sharding contiguous (the lesson's default) with --docs");
  const SeqLayout L(p.ranks, p.seq, p.sharding);
  const int C = p.ranks;

  lesson::title("Lesson 2: Ulysses, an all-to-all from sequence sharding to head sharding");
  lesson::shape(o.config.problem);
  lesson::say(
      "Attention heads never look at each other. Ulysses uses that: an all-to-all turns 'a slice of "
      "the sequence, every head' into 'the whole sequence, a slice of the heads', one for each of q, k and "
      "v; each rank then runs ordinary " +
      (p.mask().plain() ? std::string("causal") : "masked (" + p.mask().describe() + ")") +
      " attention for its heads, and one more all-to-all turns the output back. Four all-to-alls in all, in "
      "the forward.");

  lesson::banner(1, "who holds what before the all-to-all");
  const auto ex = exchange_tags(p, o.config.backend);
  std::map<std::pair<std::int64_t, std::int64_t>, int> before, after;
  for (int r = 0; r < C; ++r) {
    for (std::int64_t x : L.positions(r))
      for (std::int64_t h = 0; h < p.heads; ++h) before[{x, h}] = r;
    for (std::int64_t tag : ex[static_cast<std::size_t>(r)].held) after[{tag / kTag, tag % kTag}] = r;
  }
  lesson::expect(static_cast<std::int64_t>(after.size()) == p.seq * p.heads,
                 "after the all-to-all every (position, head) is held exactly once");
  draw_holders(L, p.heads, before);
  lesson::banner(2, "who holds what after the all-to-all");
  draw_holders(L, p.heads, after);
  lesson::say("The same numbers, moved: each rank now holds every position for " + std::to_string(p.heads / C) +
              " of the " + std::to_string(p.heads) +
              " heads. The all-to-all transposed the distributed "
              "dimension from the sequence to the heads.");
  const Exchanged& e0 = ex.front();
  for (const Exchanged& e : ex)
    lesson::expect(e.q_after == e0.q_after && e.kv_after == e0.kv_after && e.out_after == e0.out_after,
                   "every rank ends with the same shapes");
  lesson::expect(e0.q_after.s == p.seq && e0.q_after.n == p.heads / C && e0.kv_after.n == p.kv_heads / C &&
                     e0.out_after == e0.q_before,
                 "[B, S/C, N, D] -> [B, S, N/C, D] and back");
  std::cout << "Shapes on every rank, [B, S, N, D], from the buffers the exchanges returned:\n"
            << "  q      " << to_string(e0.q_before, Layout::bsnd) << " -> " << to_string(e0.q_after, Layout::bsnd)
            << "\n"
            << "  k, v   " << to_string(e0.kv_before, Layout::bsnd) << " -> " << to_string(e0.kv_after, Layout::bsnd)
            << "\n"
            << "  out    " << to_string(e0.out_before, Layout::bsnd) << " -> " << to_string(e0.out_after, Layout::bsnd)
            << "   (after attention, the inverse)\n"
            << "  that is [B, S/C, N, D] -> [B, S, N/C, D], and back for the output.\n\n";

  lesson::banner(3, "the ulysses strategy: four all-to-alls forward");
  o.config.tracing = true;
  const RunResult r = lesson::run_and_step(o.config, o);
  for (const StepFrame& f : step_frames(r)) {
    const RankStep& r0 = f.ranks.front();
    const int a2a = r0.calls.count("all_to_all") ? r0.calls.at("all_to_all") : 0;
    const int want = f.step == 0 ? 3 : f.step == 2 ? 1 : 0;
    lesson::expect(f.phase == "forward" && f.step >= 0 && f.step <= 2 && a2a == want &&
                       r0.blocks.size() == (f.step == 1 ? 1u : 0u),
                   "step 0: three all-to-alls, step 1: attention, step 2: one all-to-all");
  }
  const std::int64_t s = L.local_len(), word = 8;
  const std::int64_t q_bytes = p.batch * s * p.heads * p.head_dim * word,
                     kv_bytes = p.batch * s * p.kv_heads * p.head_dim * word;
  const std::int64_t want = (2 * q_bytes + 2 * kv_bytes) * (C - 1) / C;
  std::cout << "  rank  calls            bytes sent  (C-1)/C x (q + k + v + out)\n";
  for (const RankReport& rk : r.ranks) {
    const auto& cc = rk.stats.comm_counts();
    lesson::expect(cc.count("all_to_all") == 4 && cc.bytes_sent == want, "4 all-to-alls, each (C-1)/C of its tensor");
    std::cout << "  " << lesson::left(std::to_string(rk.rank), 6)
              << lesson::left("all_to_all " + std::to_string(cc.count("all_to_all")), 17)
              << lesson::left(lesson::bytes(cc.bytes_sent), 12) << lesson::bytes(want) << "\n";
  }
  std::cout << "\n";
  lesson::say("Three all-to-alls for q, k and v (step 0 of the run), attention over all " + std::to_string(p.seq) +
              " positions for " + std::to_string(p.heads / C) +
              " heads (step 1), one all-to-all for out (step 2). The attention itself is an ordinary kernel "
              "call; run with --step to watch it.");

  lesson::banner(4, "the limit: the degree must divide the heads");
  lesson::say(
      "Each rank must receive whole heads, so C must divide Nq (and Nkv: lesson 9). Here is what "
      "cpsim says for two degrees the " +
      std::to_string(p.heads) + " heads cannot support:");
  int bad = 2;
  while (p.heads % bad == 0) ++bad;
  show_refusal(p, bad);
  show_refusal(p, static_cast<int>(2 * p.heads));
  std::cout << "\nUlysses, " << C << " ranks, against the single-process reference:\n";
  return lesson::verdicts(r) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return lesson::guarded("lesson 02_ulysses", [&] { return run_lesson(argc, argv); });
}
