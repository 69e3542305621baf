// Lesson 11: how to choose. Every strategy on the same shape, side by side.
//
// Work (visible pairs per rank), bytes sent, peak memory and time come from each run's Recorders; the degree
// each strategy allows for this head count is found by asking cpsim's own validation. STEPs 4 and 5 ask the machine
// model (sim/model): its predicted times on one node and on two, then its planner's search of every choice.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <optional>

#include "lessons/common/lesson.hpp"
#include "sim/core/error.hpp"
#include "sim/layout/work_table.hpp"
#include "sim/model/plan.hpp"
#include "sim/model/predict.hpp"

using namespace cpsim;

namespace {

struct Variant {
  std::string name;
  StrategyKind kind;
  Sharding sharding;
};

// STEP 4: the machine model's forward+backward times (ms) on one machine, the fastest starred, and the time the
// slowest rank waited (docs/concepts.md: wait). Model times are computed, not measured: the transcript checks them.
model::PredictTable predicted_table(const char* machine, int ranks, const std::vector<std::string>& choices) {
  model::PredictSpec spec;
  spec.machine = model::load_machine(machine);
  spec.problem.ranks = ranks;
  spec.problem.heads = spec.problem.kv_heads = 64;
  spec.problem.head_dim = 128;
  spec.problem.dtype = DType::bf16;
  spec.problem.sharding = Sharding::zigzag;
  spec.seqs = {16384, 65536, 262144};
  for (const std::string& c : choices) spec.strategies.push_back(model::parse_choice(c));
  const model::PredictTable t = model::predict(spec);
  const std::size_t n = spec.strategies.size();
  std::cout << "  " << machine << ", C=" << ranks << ": forward+backward ms (exposed communication ms)\n";
  std::string header = "      S";
  for (const auto& c : spec.strategies) header += " " + lesson::left(model::choice_label(c, ranks), 17);
  lesson::row(header);
  for (std::size_t row = 0; row < spec.seqs.size(); ++row) {
    const int best = model::fastest(t, row, n, true);
    std::string line = "  " + lesson::left(std::to_string(spec.seqs[row] / 1024) + "K", 5);
    for (std::size_t k = 0; k < n; ++k) {
      const model::Cell& cell = t.cells[row * n + k];
      lesson::expect(cell.valid, "every modeled strategy runs");
      line += " " + lesson::left(lesson::fixed(cell.total_us / 1000, 2) + (static_cast<int>(k) == best ? "*" : "") +
                                     " (" + lesson::fixed(cell.exposed_us / 1000, 2) + ")",
                                 17);
    }
    lesson::row(line);
  }
  std::cout << "\n";
  return t;
}

// STEP 5: what `cpsim plan` answers for STEP 4's shape on two nodes at 1M tokens, printed in 80 columns (cpsim plan
// prints the same rows, with wider columns), and what it says checked against it and against STEP 4's two-node
// table `two` (columns ulysses, ring, hybrid 8x2, hybrid 4x4; rows 16K, 64K, 256K).
void plan_step(const model::PredictTable& two) {
  const char* command = "cpsim plan --machine h100-ib --ranks 16 --heads 64 --head-dim 128 --seq 1M";
  model::PlanSpec spec;
  spec.machine = model::load_machine("h100-ib");
  spec.problem.ranks = 16;
  spec.problem.seq = 1 << 20;
  spec.problem.heads = spec.problem.kv_heads = 64;
  spec.problem.head_dim = 128;
  spec.problem.dtype = DType::bf16;
  const model::Plan plan = model::plan(spec);
  lesson::say(
      "STEP 4 compared four choices picked by hand. cpsim plan (docs/model.md, section 6) searches them all "
      "for one shape: every strategy, every mesh A x R that C allows, three shardings and, where an all-to-all "
      "could use it, KV replication. It counts each candidate's peak memory on the counting device, drops "
      "what does not fit a GPU, and ranks the rest by modeled forward+backward time. The shape of STEP 4 on "
      "the two nodes, at 1M tokens:");
  std::cout << "  $ " << command << "\n"
            << "  " << plan.searched << " candidates searched, " << plan.fits.size() << " fit; the 5 fastest:\n";
  lesson::row("  #  candidate            time ms   exposed ms  memory GiB efficiency");
  const std::size_t n = std::min<std::size_t>(5, plan.fits.size());
  for (std::size_t i = 0; i < n; ++i) {
    const model::PlanEntry& e = plan.fits[i];
    lesson::row("  " + lesson::left(std::to_string(i + 1), 3) + lesson::left(e.candidate.label, 21) +
                lesson::left(lesson::fixed(e.cell.total_us / 1000, 2), 10) +
                lesson::left(lesson::fixed(e.cell.exposed_us / 1000, 2), 12) +
                lesson::left(lesson::fixed(static_cast<double>(e.total_bytes()) / (1 << 30), 1), 11) +
                lesson::fixed(e.cell.efficiency, 2));
  }
  std::cout << "  rejected:\n";
  for (const model::Rejection& r : plan.rejected) std::cout << lesson::wrap(r.configs + ": " + r.why, 78, "    ");
  std::cout << "  time: forward + backward; exposed: communication not hidden behind compute;\n"
               "  memory: peak attention buffers per GPU, in GiB (2^30 bytes);\n"
               "  efficiency: one GPU's time on the whole sequence / (C x time)\n\n";

  // What the paragraph below says, read from the plan.
  lesson::expect(n == 5, "at least five candidates fit");
  const model::PlanEntry& best = plan.fits.front();
  const model::PlanEntry* mesh = nullptr;
  for (const model::PlanEntry& e : plan.fits)
    if (!mesh && e.candidate.strategy.kind == StrategyKind::hybrid && e.candidate.strategy.a2a == 8 &&
        e.candidate.sharding == Sharding::zigzag)
      mesh = &e;
  lesson::expect(mesh != nullptr && mesh->cell.total_us < (1 + model::kTie) * best.cell.total_us,
                 "the 8x2 mesh on zigzag shards ties with the planner's fastest (within 2%)");
  const model::PlanEntry& other = mesh == &best ? plan.fits[1] : best;  // the mesh's nearest rival
  const double gap = std::abs(other.cell.total_us / mesh->cell.total_us - 1);
  lesson::expect(best.cell.efficiency > 0.95, "the fastest runs near one GPU's rate per GPU");
  std::size_t ring_rank = 0;
  const model::PlanEntry* ring = nullptr;
  for (std::size_t i = 0; i < plan.fits.size(); ++i)
    if (plan.fits[i].candidate.strategy.kind == StrategyKind::ring && !ring) {
      ring = &plan.fits[i];
      ring_rank = i + 1;
    }
  lesson::expect(ring != nullptr, "the pure ring fits");
  bool all_gather_fits = false, all_gather_refused = false;
  for (const model::PlanEntry& e : plan.fits) all_gather_fits |= e.candidate.strategy.kind == StrategyKind::all_gather;
  for (const model::Rejection& r : plan.rejected) all_gather_refused |= r.kind == "all_gather";
  lesson::expect(!all_gather_fits && all_gather_refused && plan.rejected.size() == 1,
                 "only the all-gather is rejected");
  lesson::expect(best.total_bytes() < spec.machine.memory_gb * 1e9, "the fastest fits");
  const double exposed_share = best.cell.exposed_us / best.cell.total_us;
  lesson::expect(exposed_share < 0.01, "the fastest waits under 1% of its time");
  const double ring_then = two.cells[2 * 4 + 1].total_us / two.cells[2 * 4 + 2].total_us;
  const double ring_now = ring->cell.total_us / mesh->cell.total_us;
  lesson::expect(ring_now < ring_then, "the pure ring is closer to the mesh at 1M than at 256K");
  lesson::expect(ring->cell.exposed_us < 0.001 * ring->cell.total_us, "at 1M the ring's transfers are hidden");
  lesson::say(std::string("Its answer is STEP 4's: the 8x2 mesh on zigzag shards, ") +
              (mesh == &best ? "the fastest" : "within 2% of the fastest") + ", at " +
              lesson::fixed(mesh->cell.efficiency, 2) + " of one GPU's rate per GPU, only " +
              lesson::fixed(100 * exposed_share, 1) + "% of the fastest's time waiting; " + other.candidate.label +
              " is " + lesson::fixed(100 * gap, 1) + "% " + (mesh == &best ? "behind" : "ahead") +
              ", a tie under the 2% cpsim plan calls one (it says which term decides). The planner also weighed what STEP 4 left out: the other meshes, contiguous "
              "and striped shards and memory. The all-gather is the one strategy it rejects: every rank holds the whole "
              "sequence's K and V (and backward their gradients), more than a GPU holds at 1M tokens, while the "
              "others keep O(S/C) per rank. Length moves the answer too: the pure ring, " +
              lesson::fixed(ring_then, 2) + " x the mesh's time at 256K in STEP 4, is " + lesson::fixed(ring_now, 2) +
              " x here (" + ring->candidate.label + ", number " + std::to_string(ring_rank) + " of the " +
              std::to_string(plan.fits.size()) + " that fit) with " + lesson::fixed(ring->cell.exposed_us / 1000, 2) +
              " ms of its " + lesson::fixed(ring->cell.total_us / 1000, 0) +
              " waiting: a step's compute grows as S^2 and its transfer as S, so at 1M the compute covers every "
              "transfer, even across InfiniBand. What is left between it and the mesh is compute: the ring's C "
              "blocks are shorter than the mesh's, and the kernel runs short blocks below its best rate (lesson 10).");
}

// The largest C <= limit that validation accepts for this strategy and head count (S = 2C: only heads object).
int max_degree(Problem p, StrategyKind k, int limit) {
  int best = 0;
  for (int C = 1; C <= limit; ++C) {
    p.ranks = C;
    p.seq = 2 * C;
    p.a2a = 0;
    try {
      validate(p, k);
      best = C;
    } catch (const UsageError&) {
    }
  }
  return best;
}

int run_lesson(int argc, char** argv) {
  lesson::Options o;
  o.mask_refusal =
      "lesson 11 chooses a strategy for one causal sequence and takes no --docs or --window; `cpsim "
      "predict` and `cpsim plan` take them (docs/predictions.md#masks), and lesson 12 "
      "(lessons/12_documents) teaches masks";
  Problem& p = o.config.problem;
  p.ranks = 4;
  p.seq = 64;
  p.heads = p.kv_heads = 4;
  p.head_dim = 16;
  if (!lesson::parse_options(argc, argv, "Lesson 11: how to choose", lesson::kShape | lesson::kStep, o)) return 0;
  o.config.backward = true;
  const int C = p.ranks;
  const std::vector<Variant> variants{{"all_gather", StrategyKind::all_gather, Sharding::zigzag},
                                      {"ulysses", StrategyKind::ulysses, Sharding::zigzag},
                                      {"ring contig", StrategyKind::ring, Sharding::contiguous},
                                      {"ring zigzag", StrategyKind::ring, Sharding::zigzag},
                                      {"hybrid", StrategyKind::hybrid, Sharding::zigzag}};

  lesson::title("Lesson 11: how to choose");
  lesson::shape(o.config.problem, "forward and backward; ring contig runs on contiguous shards");
  lesson::say("The same attention on C=" + std::to_string(C) +
              " ranks with every strategy, each rank counting its work, bytes and memory the same way.");

  lesson::banner(1, "work, bytes and memory per rank");
  std::vector<std::optional<RunResult>> results;  // empty where cpsim refuses the strategy for this shape
  std::cout << "  strategy     pairs max  max/mean  sent/rank   peak/rank\n";
  std::vector<std::string> call_lines;
  for (const Variant& v : variants) {
    RunConfig c = o.config;
    c.strategy = v.kind;
    c.problem.sharding = v.sharding;
    try {
      validate(c.problem, v.kind);
    } catch (const UsageError& e) {  // e.g. Ulysses with fewer KV heads than ranks: STEP 3 gives the limits
      results.emplace_back();
      std::cout << "  " << lesson::left(v.name, 13) << "refused by cpsim for this shape (STEP 3)\n";
      call_lines.push_back("  " + lesson::left(v.name, 13) + "-");
      continue;
    }
    // Not replayed with --step (35 frames): lessons 2-8 step through each strategy; here --step pauses at STEPs.
    results.push_back(lesson::run_and_step(c, o, false));
    const RunResult& r = *results.back();
    std::vector<double> pairs;
    std::int64_t sent = 0, peak = 0;
    for (const RankReport& rk : r.ranks) {
      pairs.push_back(static_cast<double>(rk.stats.total_work().pairs));
      sent = std::max(sent, rk.stats.comm_counts().bytes_sent);
      peak = std::max(peak, rk.stats.peak_bytes());
    }
    std::string calls;
    for (const auto& [k, n] : r.ranks.front().stats.comm_counts().calls)
      calls += (calls.empty() ? "" : ", ") + k + " " + std::to_string(n);
    call_lines.push_back("  " + lesson::left(v.name, 13) + (calls.empty() ? "none" : calls));
    const double most = *std::max_element(pairs.begin(), pairs.end());
    std::cout << "  " << lesson::left(v.name, 13) << lesson::left(std::to_string(static_cast<std::int64_t>(most)), 11)
              << lesson::left(lesson::fixed(imbalance(pairs), 2), 10) << lesson::left(lesson::bytes(sent), 12)
              << lesson::bytes(peak) << "\n";
  }
  std::cout << "  pairs max: the most visible pairs on one rank, x heads x batch, forward and\n"
               "  backward; max/mean: that over the ranks' mean (1.00: balanced); sent and peak:\n"
               "  the most any rank sent and held\n";
  std::cout << "\n  Calls on rank 0 (split: the hybrid setting up its two sub-communicators):\n";
  for (const std::string& line : call_lines) std::cout << line << "\n";
  std::cout << "\n";

  lesson::banner(2, "time on this machine (the slowest rank, forward + backward)");
  for (std::size_t i = 0; i < variants.size(); ++i) {
    if (!results[i]) continue;
    double slowest = 0;
    for (const RankReport& rk : results[i]->ranks) {
      double t = 0;
      for (const auto& [phase, us] : rk.stats.phase_us()) t += us;
      slowest = std::max(slowest, t);
    }
    std::cout << "  " << lesson::left(variants[i].name, 13) << lesson::ms(slowest / 1000) << "\n";
  }
  std::cout << "\n";
  lesson::say(
      "One run each, every rank a thread of one CPU: the times are noisy and show the cost of the work "
      "and of copying, not of real links. The counts above are what carries over to real machines.");

  lesson::banner(3, "the choice, made concrete");
  const int limit = 8 * static_cast<int>(p.heads);
  const int ul = max_degree(p, StrategyKind::ulysses, limit);
  Problem rep = p;
  rep.kv_replicate = true;
  const int ul_rep = max_degree(rep, StrategyKind::ulysses, limit);
  const int ring = max_degree(p, StrategyKind::ring, limit);
  lesson::expect(ring == limit, "the ring accepts every degree tried");
  std::cout << "  The largest C cpsim accepts for Nq=" << p.heads << ", Nkv=" << p.kv_heads << " (tried up to " << limit
            << "):\n"
            << "    ulysses: " << ul << ", with --kv-replicate: " << ul_rep << "; ring and all_gather: " << ring
            << " (no head limit);\n    hybrid: any C = A x R whose A2A group size A ulysses accepts\n\n";
  std::cout << "  all_gather  talks:  2 all-gathers forward; 2 more + 2 reduce-scatters backward\n"
               "              limit:  none from the heads; memory: full-length K and V, O(S)\n"
               "              kernel: plain attention on a prefix; overlap: none\n"
               "              suits:  short sequences, few ranks, the simplest code\n"
               "  ulysses     talks:  4 all-to-alls forward, 4 backward, (C-1)/C of each tensor\n"
               "              limit:  C divides Nq and Nkv (Nq: --kv-replicate); memory O(S/C)\n"
               "              kernel: plain attention over the whole sequence; overlap: none\n"
               "              suits:  one fast domain (a node), enough heads\n"
               "  ring        talks:  C-1 K/V passes forward; C-1 K/V and C-1 dK/dV backward\n"
               "              limit:  none from the heads; memory O(S/C)\n"
               "              kernel: blocks merged by log-sum-exp; overlap: exchange vs block\n"
               "              suits:  very long sequences, across nodes; zigzag for balance\n"
               "  hybrid      talks:  all-to-alls inside groups of A, ring passes across R\n"
               "              limit:  A as for ulysses, any R; memory O(S/C)\n"
               "              kernel: as the ring; overlap: the ring part\n"
               "              suits:  fast groups (nodes) joined by a slower network\n\n";
  lesson::say(
      "Read the table against the measurements above: the all-gather's peak memory, Ulysses' "
      "all-to-alls and head limit, the contiguous ring's imbalance (max/mean) and the zigzag ring's "
      "balance, the hybrid's mix of both kinds of call.");

  lesson::banner(4, "the answer changes with the machine: one node, then two");
  lesson::say(
      "The counts above carry over to real machines; the times do not. cpsim predict (docs/model.md) runs "
      "the same strategy code on a counting device and replays it on a model of H100s, on the benchmark shape "
      "of the blog post On Context Parallelism (64 heads of 128, bf16, zigzag), forward and backward. First one node "
      "of 8 GPUs, every "
      "link NVLink; then 16 GPUs on two such nodes joined by InfiniBand (h100-ib):");
  const model::PredictTable one = predicted_table("h100-sxm-8", 8, {"ulysses", "ring", "hybrid:2", "hybrid:4"});
  const model::PredictTable two = predicted_table("h100-ib", 16, {"ulysses", "ring", "hybrid:8", "hybrid:4"});
  // What the paragraph below says, checked against the tables it describes (columns: ulysses, ring, the meshes).
  const auto cell = [](const model::PredictTable& t, std::size_t row, std::size_t k) -> const model::Cell& {
    return t.cells[row * 4 + k];
  };
  for (std::size_t row = 0; row < 3; ++row)
    lesson::expect(model::fastest(one, row, 4, true) == 0, "one node: Ulysses is the fastest at every length");
  for (std::size_t k = 2; k < 4; ++k)
    lesson::expect(cell(one, 2, k).total_us < 1.02 * cell(one, 2, 0).total_us,
                   "one node, 256K: the meshes within 2% of Ulysses, a tie");
  for (std::size_t row = 0; row < 3; ++row) {
    lesson::expect(model::fastest(two, row, 4, true) == 2, "two nodes: the 8x2 mesh is the fastest");
    lesson::expect(cell(two, row, 1).total_us > 1.5 * cell(two, row, 2).total_us,
                   "two nodes: the pure ring takes over half as long again as the 8x2 mesh");
    lesson::expect(cell(two, row, 2).exposed_us * 10 < cell(two, row, 1).exposed_us,
                   "two nodes: the mesh waits under a tenth of the ring's wait");
  }
  lesson::expect(cell(one, 2, 1).exposed_us < cell(one, 2, 0).exposed_us,
                 "one node, longest length: the ring hides more of its communication than Ulysses");
  lesson::say(
      "On one node every byte moves at NVLink speed and Ulysses is the fastest at every length: a few "
      "all-to-alls (each carrying (C-1)/C of Q, K, V or O) and then one kernel over the whole sequence for "
      "its heads. It does not hide its communication (at 256K the ring, whose transfers run beside its "
      "blocks, waits less), but its kernel runs long rows at the best rate, where the ring runs C "
      "shorter blocks; at 256K the two meshes come within 2% of it, a tie the model does not resolve. On two "
      "nodes the pure ring takes over half as long again as the best: each of its "
      "steps waits for the hop that crosses InfiniBand, and a step's compute no longer covers that transfer. "
      "The 8x2 mesh keeps the all-to-all inside each node and sends only the ring's K/V (and backward its "
      "dK/dV) across the network, mostly behind a block's compute (under a tenth of the ring's wait), which makes it "
      "the fastest at every length. Try cpsim predict --machine h100-ib --ranks 32 to "
      "see the network take a larger share.");

  lesson::banner(5, "ask the planner: cpsim plan");
  plan_step(two);

  std::cout << "Every strategy, forward and backward, against the single-process reference:\n";
  bool ok = true;
  for (std::size_t i = 0; i < variants.size(); ++i)
    if (results[i])
      ok = lesson::verdicts(*results[i], variants[i].name) && ok;
    else
      std::cout << lesson::left(variants[i].name, 12) << "refused for this shape (STEP 3)\n";
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return lesson::guarded("lesson 11_choosing", [&] { return run_lesson(argc, argv); });
}
